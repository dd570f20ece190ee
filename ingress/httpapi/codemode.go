package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// Code mode over HTTP: the registry of upstream MCP servers
// (/v1/mcp-servers), tool search across them (/v1/tools); and the tenant's
// settings (/v1/settings) with its webhook secret.

func (s *Server) handleCreateMCPServer(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var in codemode.Registration
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	srv, err := s.svc.CodeMode().RegisterMCPServer(r.Context(), p, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/mcp-servers/"+srv.Name)
	WriteJSON(w, http.StatusCreated, srv)
	return nil
}

func (s *Server) handleListMCPServers(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	list, err := s.svc.CodeMode().MCPServers(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, MCPServerList{Servers: list})
	return nil
}

func (s *Server) handleGetMCPServer(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	detail, err := s.svc.CodeMode().MCPServer(r.Context(), p, r.PathValue("name"), r.URL.Query().Get("detail"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, detail)
	return nil
}

func (s *Server) handleUpdateMCPServer(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var upd codemode.Update
	if err := decodeBody(w, r, &upd); err != nil {
		return err
	}
	srv, err := s.svc.CodeMode().UpdateMCPServer(r.Context(), p, r.PathValue("name"), upd)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, srv)
	return nil
}

func (s *Server) handleDeleteMCPServer(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	if err := s.svc.CodeMode().DeleteMCPServer(r.Context(), p, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleRefreshMCPServer(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	srv, err := s.svc.CodeMode().RefreshMCPServer(r.Context(), p, r.PathValue("name"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, srv)
	return nil
}

func (s *Server) handleSearchTools(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 500 {
		return service.BadRequest("q", "is longer than 500 characters")
	}
	if err := service.CheckText("q", q); err != nil {
		return err
	}
	detail := r.URL.Query().Get("detail")
	if !codemode.ValidDetail(detail) {
		return service.BadRequest("detail", "must be name, description or full")
	}
	limit := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return service.BadRequest("limit", "must be a number between 1 and 100")
		}
		limit = n
	}
	tools, err := s.svc.CodeMode().SearchTools(r.Context(), p, q, detail, limit)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, toolList{Tools: tools})
	return nil
}

// settings are a tenant's own switches (the body of PATCH /v1/settings).
type settings struct {
	PIITokens *bool `json:"pii_tokens,omitempty"`
	// WebhookURL is the default webhook ("" removes it).
	WebhookURL *string `json:"webhook_url,omitempty"`
	// Egress holds the hosts the tenant's jobs may reach.
	Egress *egressSettings `json:"egress,omitempty"`
}

// egressSettings is settings.egress.
type egressSettings struct {
	Allow []string `json:"allow"`
}

func (s *Server) handleGetSettings(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	st, err := s.svc.Settings(r.Context(), p)
	if err != nil {
		return err
	}
	writeSettings(w, st)
	return nil
}

func writeSettings(w http.ResponseWriter, st service.Settings) {
	WriteJSON(w, http.StatusOK, map[string]any{"pii_tokens": st.PIITokens, "webhook_url": nilIfEmpty(st.WebhookURL),
		"egress": egressSettings{Allow: st.EgressAllow}})
}

func (s *Server) handlePatchSettings(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	var in settings
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	change := service.SettingsChange{PIITokens: in.PIITokens, WebhookURL: in.WebhookURL}
	if in.Egress != nil {
		allow := in.Egress.Allow
		if allow == nil {
			allow = []string{}
		}
		change.EgressAllow = &allow
	}
	st, err := s.svc.UpdateSettings(r.Context(), p, change)
	if err != nil {
		return err
	}
	writeSettings(w, st)
	return nil
}

// handleWebhookSecret answers the tenant's signing secret, made on first use.
func (s *Server) handleWebhookSecret(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sec, err := s.svc.WebhookSecret(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sec)
	return nil
}

// handleRotateWebhookSecret gives the tenant a new signing secret; the old
// one goes on signing alongside for a day.
func (s *Server) handleRotateWebhookSecret(w http.ResponseWriter, r *http.Request, p service.Principal) error {
	sec, err := s.svc.RotateWebhookSecret(r.Context(), p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, sec)
	return nil
}

// decodeBody decodes a JSON body of at most 1 MiB strictly into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 1<<20), v)
}
