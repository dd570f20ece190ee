package httpapi

import (
	"net/http"

	"github.com/gantryhq/gantry/ingress/service"
)

// Chat runs the agent loop behind POST /v1/agent/chat/completions
// (chat.Loop). The route is in the route table like any other; its bodies
// are chat's wire types, reflected into the document.
type Chat interface {
	// ServeChatCompletions answers one authenticated request. It acts as
	// the request's tenant by calling api, the API's own handler, with the
	// request's API key, and writes its own answer or error body.
	ServeChatCompletions(w http.ResponseWriter, r *http.Request, api http.Handler)
}

// handleChatCompletions hands the request to the agent loop, which calls
// the API back, in-process, as the request's tenant.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request, _ service.Principal) error {
	if s.cfg.Chat == nil {
		return &service.Error{Status: http.StatusServiceUnavailable, Code: service.CodeUnavailable, Type: "server_error",
			Message: "the agent is not configured on this gantry: the operator sets GANTRY_LLM_URL and GANTRY_LLM_MODEL (an OpenAI-compatible server)"}
	}
	s.cfg.Chat.ServeChatCompletions(w, r, s.Handler())
	return nil
}
