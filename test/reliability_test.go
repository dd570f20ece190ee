package test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

// TestBinaryStdin sends stdin with NUL and non-UTF-8 bytes base64-encoded:
// the program reads exactly those bytes.
func TestBinaryStdin(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=1", "GANTRY_POOL_MIN=1")
	raw := []byte("\x00\x01\xfe\xff text \x00\n")
	body, _ := json.Marshal(map[string]any{"language": "python", "stdin_encoding": "base64",
		"stdin": base64.StdEncoding.EncodeToString(raw),
		"code":  "import sys; print(sys.stdin.buffer.read().hex())"})
	j := d.job(t, "POST", "/v1/execute", string(body))
	if j.Status != jobs.StatusSucceeded || j.Stdout != "0001feff207465787420000a\n" {
		t.Fatalf("job = %+v", j)
	}
	// As text, a NUL is refused before anything runs.
	r := d.call(t, "POST", "/v1/jobs", `{"language":"python","code":"x","stdin":"a\u0000"}`)
	if r.status != 400 {
		t.Errorf("NUL in text stdin: %d %s", r.status, r.body)
	}
}
