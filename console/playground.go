package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// The agent playground: a chat whose turns go to POST
// /v1/agent/chat/completions (streamed), as the signed-in tenant. The page
// keeps the conversation; the loop runs server-side.

func (c *Console) handlePlayground(w http.ResponseWriter, r *http.Request, s *session) error {
	c.render(w, r, s, http.StatusOK, "playground", "Playground", "playground", nil, nil)
	return nil
}

// maxChatBody caps a conversation the page sends.
const maxChatBody = 1 << 20

// handlePlaygroundChat relays a turn ({"messages": [...]}) to the agent
// endpoint with stream: true, and its events back to the page.
func (c *Console) handlePlaygroundChat(w http.ResponseWriter, r *http.Request, s *session) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChatBody))
	if err != nil {
		return badForm("messages", "the conversation is too long: start a new one")
	}
	var in struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Messages) == 0 {
		return badForm("messages", "the page sent no conversation")
	}
	out, _ := json.Marshal(map[string]any{"model": "gantry", "messages": in.Messages, "stream": true})
	req, err := s.api.Request(r.Context(), http.MethodPost, "/v1/agent/chat/completions", bytes.NewReader(out), "application/json")
	if err != nil {
		return err
	}
	// Errors go back as the API's JSON, which the page's script shows.
	s.api.Serve(w, req)
	return nil
}
