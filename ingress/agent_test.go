package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/ingress"
)

// echoAgent stands in for the agent loop: it reads a job through the API
// it is handed, with the caller's key, and answers what the API said.
type echoAgent struct{ jobID string }

func (a echoAgent) ServeChatCompletions(w http.ResponseWriter, r *http.Request, api http.Handler) {
	req, _ := http.NewRequestWithContext(r.Context(), "GET", "/v1/jobs/"+a.jobID, nil)
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	api.ServeHTTP(w, req)
}

func TestAgentRoute(t *testing.T) {
	off := newHarness(t)
	r := off.do(t, off.keyA, "POST", "/v1/agent/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	if r.status != 503 || !strings.Contains(string(r.body), "GANTRY_LLM_URL") {
		t.Errorf("no agent configured: %d %s", r.status, r.body)
	}

	var agent echoAgent
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Agent = &agent })
	agent.jobID = h.do(t, h.keyB, "POST", "/v1/jobs", pyJob).job(t).ID
	if r := h.do(t, "", "POST", "/v1/agent/chat/completions", `{}`); r.status != 401 {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
	// The agent acts as its caller: B reads B's job, A does not see it.
	if r := h.do(t, h.keyB, "POST", "/v1/agent/chat/completions", `{}`); r.status != 200 || !strings.Contains(string(r.body), agent.jobID) {
		t.Errorf("as B: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/agent/chat/completions", `{}`); r.status != 404 {
		t.Errorf("as A: %d %s", r.status, r.body)
	}
}
