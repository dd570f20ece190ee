package e2b

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func TestTTL(t *testing.T) {
	for in, want := range map[float64]int{0: jobs.MinSessionTTL, 15: 15, 299.5: 300, 1e12: jobs.MaxSessionTTL, -3: jobs.MinSessionTTL} {
		if got := ttl(in); got != want {
			t.Errorf("ttl(%v) = %d, want %d", in, got, want)
		}
	}
}

// TestListQuery reads E2B's list filters as its SDKs send them: each key
// and value escaped, then the pairs as a query, then that as the
// parameter's value.
func TestListQuery(t *testing.T) {
	inner := url.Values{url.QueryEscape("a b"): {url.QueryEscape("x=y&z")}, "team": {"1"}}.Encode()
	q := url.Values{"metadata": {inner}, "state": {"running,paused"}}
	lq, err := parseListQuery(q)
	if err != nil || lq.metadata["a b"] != "x=y&z" || lq.metadata["team"] != "1" || !lq.running {
		t.Fatalf("%+v %v", lq, err)
	}
	if lq, _ := parseListQuery(url.Values{"state": {"paused"}}); lq.running {
		t.Error("state=paused admits running sandboxes")
	}
	match := jobs.Session{Stateful: true, Metadata: map[string]string{"a b": "x=y&z", "team": "1", "other": "o"}}
	if !lq.match(match) {
		t.Error("no match")
	}
	match.Stateful = false
	if lq.match(match) {
		t.Error("a session that is not stateful is a sandbox")
	}
}

func TestRefusals(t *testing.T) {
	yes := true
	for name, req := range map[string]newSandbox{
		"internet":   {AllowInternetAccess: &yes},
		"allowOut":   {Network: &networkConfig{AllowOut: []string{"1.1.1.1"}}},
		"auto pause": {AutoPause: &yes},
		"mcp":        {MCP: []byte(`{"x":{}}`)},
		"volumes":    {VolumeMounts: []json.RawMessage{json.RawMessage(`{}`)}},
		"auto resume": {AutoResume: &struct {
			Enabled bool `json:"enabled"`
		}{true}},
	} {
		if err := req.refuse(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	no := false
	ok := newSandbox{AllowInternetAccess: &no, Network: &networkConfig{}, MCP: []byte("null"), Secure: &yes}
	if err := ok.refuse(); err != nil {
		t.Errorf("a sandbox without a way out: %v", err)
	}
}

// FuzzNewSandbox feeds arbitrary bodies to what reads E2B's create and
// timeout requests (untrusted): no panic; an error is E2B's.
func FuzzNewSandbox(f *testing.F) {
	f.Add([]byte(`{"templateID":"code-interpreter-v1","timeout":300,"metadata":{"a":"b"},"envVars":{"K":"v"}}`))
	f.Add([]byte(`{"templateID":"base","network":{"allowOut":["0.0.0.0/0"]},"autoResume":{"enabled":true}}`))
	f.Add([]byte(`{"timeout":"x"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req newSandbox
		r := httptest.NewRequest("POST", "/v2/sandboxes", bytes.NewReader(body))
		if err := decode(r, &req); err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("not E2B's error: %T %v", err, err)
			}
			return
		}
		_ = req.refuse()
		if req.Timeout != nil {
			if got := ttl(*req.Timeout); got < jobs.MinSessionTTL || got > jobs.MaxSessionTTL {
				t.Fatalf("ttl %d", got)
			}
		}
		_, _ = parseListQuery(url.Values{"metadata": {string(body)}, "state": {string(body)}})
	})
}
