package ingress_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress"
)

// TestUntrustedStrings: bytes Postgres cannot store (NUL) and bodies that
// are not UTF-8 are refused with a 400 naming the field, never a 500; binary
// stdin goes in base64-encoded and reaches the runner's claim exactly.
func TestUntrustedStrings(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name, method, path, body string
		field                    string
	}{
		{"NUL in stdin", "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"a\u0000b"}`, "stdin"},
		{"NUL in a metadata key", "POST", "/v1/jobs", `{"language":"python","code":"x","metadata":{"k\u0000":"v"}}`, "metadata"},
		{"NUL in a metadata value", "POST", "/v1/execute", `{"language":"python","code":"x","metadata":{"agent":"v\u0000"}}`, "metadata.agent"},
		{"NUL in session metadata", "POST", "/v1/sessions", `{"language":"python","metadata":{"who":"\u0000"}}`, "metadata.who"},
		{"NUL in a session metadata key", "POST", "/v1/sessions", `{"metadata":{"\u0000":"x"}}`, "metadata"},
		{"invalid UTF-8 in code", "POST", "/v1/jobs", "{\"language\":\"python\",\"code\":\"print('\xff\xfe')\"}", "code"},
		{"invalid UTF-8 in metadata", "POST", "/v1/jobs", "{\"language\":\"python\",\"code\":\"x\",\"metadata\":{\"a\":\"\xc3\"}}", "metadata.a"},
		{"invalid UTF-8 in a session", "POST", "/v1/sessions", "{\"language\":\"py\xe9\"}", "language"},
		{"bad stdin encoding", "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"x","stdin_encoding":"rot13"}`, "stdin_encoding"},
		{"NUL in a session filter", "GET", "/v1/jobs?session_id=%00", "", "session_id"},
		{"NUL in a skill search", "GET", "/v1/skills?q=a%00", "", "q"},
		{"invalid UTF-8 in a skill search", "GET", "/v1/skills?q=%ff", "", "q"},
		{"NUL in a skill", "PUT", "/v1/skills/probe", `{"description":"d\u0000","body":"b"}`, "description"},
		{"NUL in a skill file", "PUT", "/v1/skills/probe", `{"description":"d","body":"b","files":[{"path":"h.py","content":"\u0000"}]}`, "files[0].content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(t, h.keyA, c.method, c.path, c.body)
			var body struct{ Error ingress.APIError }
			r.json(t, &body)
			if r.status != 400 || body.Error.Code != "invalid_argument" || body.Error.Field != c.field {
				t.Errorf("got %d %s, want 400 naming %q", r.status, r.body, c.field)
			}
		})
	}

	raw := "\x00\x01\xff binary \x00\n"
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"import sys; sys.stdin.buffer.read()","stdin":"`+
		base64.StdEncoding.EncodeToString([]byte(raw))+`","stdin_encoding":"base64"}`)
	if r.status != 202 {
		t.Fatalf("binary stdin: %d %s", r.status, r.body)
	}
	c, ok, err := h.st.ClaimJob(context.Background(), r.job(t).ID, 1, "fake")
	if err != nil || !ok || c.Spec.Stdin != raw {
		t.Fatalf("the runner would get stdin %q (%v %v), want %q", c.Spec.Stdin, ok, err, raw)
	}
	if !strings.Contains(string(r.body), `"status":"queued"`) {
		t.Errorf("job: %s", r.body)
	}
}
