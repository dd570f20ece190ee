package e2b

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
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
	if err != nil || lq.metadata["a b"] != "x=y&z" || lq.metadata["team"] != "1" || !lq.running || !lq.paused {
		t.Fatalf("%+v %v", lq, err)
	}
	if lq, _ := parseListQuery(url.Values{"state": {"paused"}}); lq.running || !lq.paused {
		t.Errorf("state=paused: %+v", lq)
	}
	// As the SDKs send an array.
	if lq, _ := parseListQuery(url.Values{"state": {"running", "paused"}}); !lq.running || !lq.paused {
		t.Errorf("state=running&state=paused: %+v", lq)
	}
	if lq, _ := parseListQuery(url.Values{}); !lq.running || !lq.paused {
		t.Errorf("no state: %+v", lq)
	}
	running, _ := parseListQuery(url.Values{"state": {"running"}})
	both, _ := parseListQuery(url.Values{})
	paused := jobs.Session{Stateful: true, State: jobs.SessionPaused}
	if running.match(paused) || !both.match(paused) {
		t.Error("a paused sandbox listed as running, or not as paused")
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
	yes, no := true, false
	autoResume := &struct {
		Enabled bool `json:"enabled"`
	}{true}
	for name, req := range map[string]newSandbox{
		"a pause without memory":         {AutoPause: &yes, AutoPauseMemory: &no},
		"mcp":                            {MCP: []byte(`{"x":{}}`)},
		"volumes":                        {VolumeMounts: []json.RawMessage{json.RawMessage(`{}`)}},
		"auto resume, killed at timeout": {AutoResume: autoResume},
	} {
		if err := req.refuse(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, req := range map[string]newSandbox{
		"pause at timeout":               {AutoPause: &yes},
		"pause with memory, auto resume": {AutoPause: &yes, AutoPauseMemory: &yes, AutoResume: autoResume},
	} {
		if err := req.refuse(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := newSandbox{AllowInternetAccess: &no, Network: &networkConfig{AllowOut: []string{"1.1.1.1"}}, MCP: []byte("null"), Secure: &yes}
	if err := ok.refuse(); err != nil {
		t.Errorf("a sandbox with a network: %v", err)
	}
}

// TestToNetwork: E2B's network options as a session's network; a rule's
// header values become the session's own secrets, which the network names
// (no value is left in it); what gantry does not offer is a 501.
func TestToNetwork(t *testing.T) {
	no := false
	cfg := &networkConfig{AllowOut: []string{"API.example.com"}, Rules: map[string][]networkRule{
		"API.example.com": {{Transform: &struct {
			Headers map[string]string `json:"headers"`
		}{Headers: map[string]string{"Authorization": "Bearer sk-1", "X-Other": "Bearer sk-1"}}}},
	}}
	n, values, err := toNetwork(cfg, &no)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.DenyOut, []string{jobs.AllTraffic}) || len(values) != 1 {
		t.Fatalf("network %+v, values %d", n, len(values))
	}
	var name string
	for k, v := range values {
		name = k
		if v != "Bearer sk-1" || !strings.HasPrefix(k, "_e2b_") {
			t.Errorf("value %q named %q", v, k)
		}
	}
	h := n.Rules["api.example.com"][0].Headers
	if h["Authorization"] != jobs.SecretRef(name) || h["X-Other"] != jobs.SecretRef(name) {
		t.Errorf("rule headers %q", h)
	}
	if b, _ := json.Marshal(n); strings.Contains(string(b), "sk-1") {
		t.Errorf("the network holds the value: %s", b)
	}
	if b, _ := json.Marshal(info(n)); strings.Contains(string(b), "sk-1") || !strings.Contains(string(b), "Authorization") {
		t.Errorf("the detail shows the value, or not the header: %s", b)
	}
	if n, _, err := toNetwork(nil, nil); n != nil || err != nil {
		t.Errorf("no network: %+v %v", n, err)
	}
	for name, c := range map[string]*networkConfig{
		"egress proxy": {EgressProxy: json.RawMessage(`{"address":"p:1080"}`)},
		"iam": {Rules: map[string][]networkRule{"a.example": {{Transform: &struct {
			Headers map[string]string `json:"headers"`
		}{Headers: map[string]string{"A": "${e2b.identity.tokens.aws}"}}}}}},
	} {
		var ae *apiError
		if _, _, err := toNetwork(c, nil); !errors.As(err, &ae) || ae.status != 501 {
			t.Errorf("%s: %v", name, err)
		}
	}
	var ae *apiError
	if _, _, err := toNetwork(&networkConfig{Rules: map[string][]networkRule{"10.0.0.1": {{}}}}, nil); !errors.As(err, &ae) || ae.status != 400 {
		t.Errorf("a rule for an address: %v", err)
	}
}

// FuzzNewSandbox feeds arbitrary bodies to what reads E2B's create and
// timeout requests (untrusted): no panic; an error is E2B's.
func FuzzNewSandbox(f *testing.F) {
	f.Add([]byte(`{"templateID":"code-interpreter-v1","timeout":300,"metadata":{"a":"b"},"envVars":{"K":"v"}}`))
	f.Add([]byte(`{"templateID":"base","network":{"allowOut":["0.0.0.0/0"]},"autoResume":{"enabled":true}}`))
	f.Add([]byte(`{"timeout":"x"}`))
	f.Add([]byte(`{"network":{"allowOut":["a.example"],"rules":{"A.example":[{"transform":{"headers":{"K":"v"}}}]}},"allow_internet_access":false}`))
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
		if _, _, err := toNetwork(req.Network, req.AllowInternetAccess); err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("a network's error is not E2B's: %T %v", err, err)
			}
		}
		if req.Timeout != nil {
			if got := ttl(*req.Timeout); got < jobs.MinSessionTTL || got > jobs.MaxSessionTTL {
				t.Fatalf("ttl %d", got)
			}
		}
		_, _ = parseListQuery(url.Values{"metadata": {string(body)}, "state": {string(body)}})
	})
}
