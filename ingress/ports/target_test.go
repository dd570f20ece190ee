package ports

import (
	"errors"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

const sid = "ses_01m8j7m9ctta2bzzpe83tx8akm"

func TestHostTarget(t *testing.T) {
	for _, tc := range []struct {
		host, domain string
		ours         bool
		err          error
		port         int
	}{
		{"8000-" + sid + ".localhost:8080", "localhost:8080", true, nil, 8000},
		{"8000-" + strings.ToUpper(sid) + ".LOCALHOST:8080", "localhost:8080", true, nil, 8000},
		{"8000-" + sid + ".localhost:9090", "localhost:8080", false, nil, 0}, // another port: not ours
		{"localhost:8080", "localhost:8080", false, nil, 0},                  // the API itself
		{"8000-" + sid + ".sandbox.example.com", "sandbox.example.com", true, nil, 8000},
		{"8000-" + sid + ".sandbox.example.com:443", "sandbox.example.com", true, nil, 8000},
		{"8000-" + sid + ".evilsandbox.example.com", "sandbox.example.com", false, nil, 0},
		{"gantry.example.com", "sandbox.example.com", false, nil, 0},
		{"65535-" + sid + ".localhost:8080", "localhost:8080", true, nil, 65535},
		{"65536-" + sid + ".localhost:8080", "localhost:8080", true, errBadPort, 0},
		{"0-" + sid + ".localhost:8080", "localhost:8080", true, errBadPort, 0},
		{"080-" + sid + ".localhost:8080", "localhost:8080", true, errBadPort, 0},
		{"+80-" + sid + ".localhost:8080", "localhost:8080", true, errBadPort, 0},
		{"x-" + sid + ".localhost:8080", "localhost:8080", true, errBadPort, 0},
		{"8000.localhost:8080", "localhost:8080", true, errBadHost, 0},
		{"8000-ses_nope.localhost:8080", "localhost:8080", true, errBadHost, 0},
		{"8000-" + sid + ".x.localhost:8080", "localhost:8080", true, errBadHost, 0},
		{"a.8000-" + sid + ".localhost:8080", "localhost:8080", true, errBadHost, 0},
		{"8000-" + sid + ".localhost:8080", "", false, nil, 0},
	} {
		got, ours, err := hostTarget(tc.host, tc.domain)
		if ours != tc.ours || !errors.Is(err, tc.err) || err == nil && ours && (got.port != tc.port || got.sessionID != sid) {
			t.Errorf("%q under %q: %+v ours=%v err=%v", tc.host, tc.domain, got, ours, err)
		}
	}
}

func TestPathTarget(t *testing.T) {
	for _, tc := range []struct {
		path       string
		ours       bool
		err        error
		port       int
		rest, pref string
	}{
		{"/v1/sessions/" + sid + "/ports/8000/a/b%2Fc?x", true, nil, 8000, "/a/b%2Fc?x", "/v1/sessions/" + sid + "/ports/8000"},
		{"/v1/sessions/" + sid + "/ports/8000", true, nil, 8000, "/", "/v1/sessions/" + sid + "/ports/8000"},
		{"/v1/sessions/" + sid + "/ports/8000/", true, nil, 8000, "/", "/v1/sessions/" + sid + "/ports/8000"},
		{"/v1/sessions/" + sid + "/files/x", false, nil, 0, "", ""},
		{"/v1/sessions/" + sid, false, nil, 0, "", ""},
		{"/v1/sessions", false, nil, 0, "", ""},
		{"/v1/sessions/" + sid + "/ports/", true, errBadPort, 0, "", ""},
		{"/v1/sessions/" + sid + "/ports/99999/", true, errBadPort, 0, "", ""},
		{"/v1/sessions/nope/ports/80/", true, errBadHost, 0, "", ""},
	} {
		got, ours, err := pathTarget(tc.path)
		if ours != tc.ours || !errors.Is(err, tc.err) || err == nil && ours && (got.port != tc.port || got.path != tc.rest || got.prefix != tc.pref || !got.byPath) {
			t.Errorf("%q: %+v ours=%v err=%v", tc.path, got, ours, err)
		}
	}
}

// FuzzTargets: no Host or path crashes the parsing, and whatever is taken
// names a valid session id and a port in range, from the request alone.
func FuzzTargets(f *testing.F) {
	for _, s := range []string{"8000-" + sid + ".localhost:8080", "localhost:8080", "/v1/sessions/" + sid + "/ports/8000/x", "..", "-.", ":::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, domain := range []string{"localhost:8080", "sandbox.example.com"} {
			if got, ours, err := hostTarget(s, domain); ours && err == nil {
				if !jobs.ValidID("ses", got.sessionID) || got.port < 1 || got.port > 65535 {
					t.Errorf("%q: %+v", s, got)
				}
			}
		}
		if got, ours, err := pathTarget(s); ours && err == nil {
			if !jobs.ValidID("ses", got.sessionID) || got.port < 1 || got.port > 65535 || !strings.HasPrefix(got.path, "/") {
				t.Errorf("%q: %+v", s, got)
			}
		}
	})
}
