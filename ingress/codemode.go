package ingress

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Code mode over HTTP: the registry of upstream MCP servers
// (/v1/mcp-servers), tool search across them (/v1/tools) and the tenant's
// settings (/v1/settings: privacy tokens).

func (s *Server) codeMode() (*codemode.Registry, error) {
	if s.cfg.CodeMode == nil {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "code mode is not configured on this gantry"}
	}
	return s.cfg.CodeMode, nil
}

func (s *Server) mcpServerNotFound(err error, name string) error {
	if errors.Is(err, codemode.ErrNotFound) {
		return notFound("MCP server " + strconv.Quote(name))
	}
	return err
}

func (s *Server) handleCreateMCPServer(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	var in codemode.Registration
	if err := s.decodeBody(w, r, &in); err != nil {
		return err
	}
	srv, err := reg.Register(r.Context(), p.TenantID, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/mcp-servers/"+srv.Name)
	writeJSON(w, http.StatusCreated, srv)
	return nil
}

func (s *Server) handleListMCPServers(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	list, err := reg.List(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mcpServerList{Servers: list})
	return nil
}

// mcpServerDetail is a server with its (allowed) tools.
type mcpServerDetail struct {
	codemode.Server
	ToolList []codemode.ToolInfo `json:"tool_list"`
}

func (s *Server) handleGetMCPServer(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	srv, err := reg.Get(r.Context(), p.TenantID, name)
	if err != nil {
		return s.mcpServerNotFound(err, name)
	}
	detail := r.URL.Query().Get("detail")
	if !codemode.ValidDetail(detail) {
		return badRequest("detail", "must be name, description or full")
	}
	tools, err := reg.Tools(r.Context(), p.TenantID, name, detail)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mcpServerDetail{Server: srv, ToolList: tools})
	return nil
}

func (s *Server) handleUpdateMCPServer(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	var upd codemode.Update
	if err := s.decodeBody(w, r, &upd); err != nil {
		return err
	}
	name := r.PathValue("name")
	srv, err := reg.Update(r.Context(), p.TenantID, name, upd)
	if err != nil {
		return s.mcpServerNotFound(err, name)
	}
	writeJSON(w, http.StatusOK, srv)
	return nil
}

func (s *Server) handleDeleteMCPServer(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := reg.Delete(r.Context(), p.TenantID, name); err != nil {
		return s.mcpServerNotFound(err, name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleRefreshMCPServer(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	srv, err := reg.Refresh(r.Context(), p.TenantID, name)
	if err != nil {
		return s.mcpServerNotFound(err, name)
	}
	writeJSON(w, http.StatusOK, srv)
	return nil
}

func (s *Server) handleSearchTools(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	reg, err := s.codeMode()
	if err != nil {
		return err
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 500 {
		return badRequest("q", "is longer than 500 characters")
	}
	if err := checkText("q", q); err != nil {
		return err
	}
	detail := r.URL.Query().Get("detail")
	if !codemode.ValidDetail(detail) {
		return badRequest("detail", "must be name, description or full")
	}
	limit := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("limit", "must be a number between 1 and 100")
		}
		limit = n
	}
	tools, err := reg.Search(r.Context(), p.TenantID, q, detail, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toolList{Tools: tools})
	return nil
}

// settings are a tenant's own switches.
type settings struct {
	PIITokens *bool `json:"pii_tokens,omitempty"`
	// WebhookURL is the default webhook ("" removes it).
	WebhookURL *string `json:"webhook_url,omitempty"`
}

func (s *Server) handleGetSettings(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	on, err := s.store.TenantPII(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	hook, err := s.store.TenantWebhookURL(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"pii_tokens": on, "webhook_url": nilIfEmpty(hook)})
	return nil
}

func (s *Server) handlePatchSettings(w http.ResponseWriter, r *http.Request, p store.Principal) error {
	var in settings
	if err := s.decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.PIITokens != nil {
		if *in.PIITokens && !s.cfg.Privacy {
			return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "privacy tokens need GANTRY_SECRET_KEY, which this gantry does not have"}
		}
		if err := s.store.SetTenantPII(r.Context(), p.TenantID, *in.PIITokens); err != nil {
			return err
		}
	}
	if in.WebhookURL != nil {
		if err := s.setTenantWebhook(r.Context(), p, *in.WebhookURL); err != nil {
			return err
		}
	}
	return s.handleGetSettings(w, r, p)
}

// decodeBody decodes a JSON body of at most 1 MiB strictly into v.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return jobs.DecodeStrict(http.MaxBytesReader(w, r.Body, 1<<20), v)
}
