package service

import (
	"encoding/base64"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// FuzzParseSessionToken: what any caller may present as a session token
// (untrusted) never panics the parser, and what it accepts names a
// well-formed tenant id.
func FuzzParseSessionToken(f *testing.F) {
	f.Add("gst_" + base64.RawURLEncoding.EncodeToString([]byte(jobs.NewID("ten"))) + ".abc")
	f.Add("gst_.")
	f.Add("gk_key")
	f.Fuzz(func(t *testing.T, token string) {
		tenant, ok := parseSessionToken(token)
		if ok && !jobs.ValidID("ten", tenant) {
			t.Fatalf("accepted tenant %q", tenant)
		}
	})
}
