package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/localapi"
)

// MCP servers (code mode): register, see tools, refresh, remove; and the
// tenant's settings (privacy tokens).

type mcpList struct {
	Servers []codemode.Server
	// Off is the API's answer when code mode is not configured.
	Off      *localapi.Error
	Settings struct {
		PIITokens  bool    `json:"pii_tokens"`
		WebhookURL *string `json:"webhook_url"`
	}
	Form mcpForm
}

// mcpForm is the registration form, kept when it is shown again.
type mcpForm struct {
	Name, Description, URL, Headers, DenyTools, AllowTools, TimeoutMS string
}

func (c *Console) handleMCP(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showMCP(w, r, s, http.StatusOK, mcpForm{}, nil)
}

func (c *Console) showMCP(w http.ResponseWriter, r *http.Request, s *session, status int, form mcpForm, apiErr *localapi.Error) error {
	d := mcpList{Form: form}
	var list struct {
		Servers []codemode.Server `json:"servers"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/mcp-servers", nil, &list); err != nil {
		e := localapi.AsError(err)
		if !isAPIError(err) || e.Status != http.StatusServiceUnavailable {
			return err
		}
		d.Off = e
	}
	d.Servers = list.Servers
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/settings", nil, &d.Settings); err != nil {
		return err
	}
	c.render(w, r, s, status, "mcp", "MCP servers", "mcp", d, apiErr)
	return nil
}

// splitList splits a form's list on commas and white space.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func (c *Console) handleRegisterMCP(w http.ResponseWriter, r *http.Request, s *session) error {
	f := mcpForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		URL: strings.TrimSpace(r.PostFormValue("url")), Headers: r.PostFormValue("headers"),
		AllowTools: r.PostFormValue("allow_tools"), DenyTools: r.PostFormValue("deny_tools"), TimeoutMS: strings.TrimSpace(r.PostFormValue("timeout_ms")),
	}
	reg := codemode.Registration{Name: f.Name, Description: f.Description, URL: f.URL,
		AllowTools: splitList(f.AllowTools), DenyTools: splitList(f.DenyTools)}
	for i, line := range strings.Split(f.Headers, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			// The header's value is not echoed: it may be a credential.
			f.Headers = ""
			return c.showMCP(w, r, s, http.StatusBadRequest, f, badForm("headers", "header line %d: write Name: value", i+1))
		}
		if reg.Headers == nil {
			reg.Headers = map[string]string{}
		}
		reg.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if f.TimeoutMS != "" {
		n, err := strconv.Atoi(f.TimeoutMS)
		if err != nil {
			f.Headers = ""
			return c.showMCP(w, r, s, http.StatusBadRequest, f, badForm("timeout_ms", "timeout_ms must be a whole number of milliseconds"))
		}
		reg.TimeoutMS = n
	}
	if err := s.api.JSON(r.Context(), http.MethodPost, "/v1/mcp-servers", reg, nil); err != nil {
		if e := localapi.AsError(err); isAPIError(err) && e.Status != http.StatusUnauthorized {
			f.Headers = "" // never sent back to the page: headers hold credentials
			return c.showMCP(w, r, s, e.Status, f, e)
		}
		return err
	}
	http.Redirect(w, r, Prefix+"mcp/"+url.PathEscape(f.Name), http.StatusSeeOther)
	return nil
}

type mcpServerPage struct {
	Server codemode.Server
	Tools  []codemode.ToolInfo
}

func (c *Console) handleMCPServer(w http.ResponseWriter, r *http.Request, s *session) error {
	var d struct {
		codemode.Server
		ToolList []codemode.ToolInfo `json:"tool_list"`
	}
	if err := s.api.JSON(r.Context(), http.MethodGet, "/v1/mcp-servers/"+url.PathEscape(r.PathValue("name"))+"?detail=description", nil, &d); err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "mcp_server", "MCP server "+d.Name, "mcp", mcpServerPage{Server: d.Server, Tools: d.ToolList}, nil)
	return nil
}

func (c *Console) handleRefreshMCP(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PathValue("name")
	if err := s.api.JSON(r.Context(), http.MethodPost, "/v1/mcp-servers/"+url.PathEscape(name)+"/refresh", nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"mcp/"+url.PathEscape(name), http.StatusSeeOther)
	return nil
}

func (c *Console) handleDeleteMCP(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := s.api.JSON(r.Context(), http.MethodDelete, "/v1/mcp-servers/"+url.PathEscape(r.PathValue("name")), nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"mcp", http.StatusSeeOther)
	return nil
}

// handleSettings sets the tenant's privacy tokens on or off.
func (c *Console) handleSettings(w http.ResponseWriter, r *http.Request, s *session) error {
	on := r.PostFormValue("pii_tokens") == "on"
	if err := s.api.JSON(r.Context(), http.MethodPatch, "/v1/settings", map[string]bool{"pii_tokens": on}, nil); err != nil {
		if e := localapi.AsError(err); isAPIError(err) && e.Status != http.StatusUnauthorized {
			return c.showMCP(w, r, s, e.Status, mcpForm{}, e)
		}
		return err
	}
	http.Redirect(w, r, Prefix+"mcp", http.StatusSeeOther)
	return nil
}
