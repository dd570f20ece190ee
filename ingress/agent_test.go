package ingress_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/ingress"
)

// echoAgent stands in for the agent loop: it reads a job through the API
// it is handed, with the caller's key, and answers (as a chat completion)
// what the API said.
type echoAgent struct{ jobID string }

func (a echoAgent) ServeChatCompletions(w http.ResponseWriter, r *http.Request, api http.Handler) {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		_, err = chat.DecodeRequest(b)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req := httptest.NewRequestWithContext(r.Context(), "GET", "/v1/jobs/"+a.jobID, nil)
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	var body struct {
		ID    string `json:"id"`
		Error struct{ Code string }
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(chat.Completion{
		ID: "chatcmpl-echo", Object: "chat.completion", Created: 1767225600, Model: "echo",
		Choices: []chat.Choice{{Message: chat.Message{Role: "assistant", Content: chat.Content(fmt.Sprintf("%d %s%s", rec.Code, body.ID, body.Error.Code))}, FinishReason: "stop"}},
	})
}

func TestAgentRoute(t *testing.T) {
	t.Parallel()
	const turn = `{"model": "any", "messages": [{"role": "user", "content": "hi"}]}`
	off := newHarness(t)
	r := off.do(t, off.keyA, "POST", "/v1/agent/chat/completions", turn)
	var e struct {
		Error struct{ Code, Message, Type string }
	}
	r.json(t, &e)
	if r.status != 503 || e.Error.Code != "unavailable" || e.Error.Type != "server_error" || !strings.Contains(e.Error.Message, "GANTRY_LLM_URL") {
		t.Errorf("no agent configured: %d %s", r.status, r.body)
	}

	var agent echoAgent
	h := newHarness(t, func(_ *harness, c *ingress.Config) { c.Chat = &agent })
	agent.jobID = h.do(t, h.keyB, "POST", "/v1/jobs", pyJob).job(t).ID
	if r := h.do(t, "", "POST", "/v1/agent/chat/completions", turn); r.status != 401 {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
	// The agent acts as its caller: B reads B's job, A does not see it.
	answer := func(key string) string {
		r := h.do(t, key, "POST", "/v1/agent/chat/completions", turn)
		var c chat.Completion
		r.json(t, &c)
		if r.status != 200 || len(c.Choices) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return string(c.Choices[0].Message.Content)
	}
	if got := answer(h.keyB); got != "200 "+agent.jobID {
		t.Errorf("as B, the agent read %q", got)
	}
	if got := answer(h.keyA); got != "404 not_found" {
		t.Errorf("as A, the agent read %q", got)
	}
}
