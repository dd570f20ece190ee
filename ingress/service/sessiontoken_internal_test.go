package service

import (
	"encoding/base64"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// FuzzParseSessionToken: what any caller may present as a session token
// (untrusted) never panics the parser, and what it accepts names a
// well-formed tenant and key.
func FuzzParseSessionToken(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	f.Add("gst_" + enc([]byte(jobs.NewID("ten"))) + "." + enc([]byte(jobs.NewID("key"))) + ".abc")
	f.Add("gst_" + enc([]byte(jobs.NewID("ten"))) + ".abc")
	f.Add("gst_..")
	f.Add("gk_key")
	f.Fuzz(func(t *testing.T, token string) {
		tok, ok := parseSessionToken(token)
		if ok && (!jobs.ValidID("ten", tok.tenantID) || !jobs.ValidID("key", tok.keyID) || len(tok.mac) == 0) {
			t.Fatalf("accepted %+v", tok)
		}
	})
}
