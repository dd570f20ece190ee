// Package codemode lets code running in a sandbox call the tools of the MCP
// servers its tenant registered ("code mode"): the registry of upstream
// servers with sealed credentials and cached, searchable tool lists; the
// connections to the upstreams; and the per-job bridge through which the
// sandbox reaches them, which enforces the tenant's allow/deny lists, a
// call budget and timeouts, and records every call.
//
// The sandbox never sees a credential and still has no network: its code
// talks to the sandbox agent over a unix socket, the agent relays each
// request over its attach stream to the runner, and the runner makes the
// upstream call.
package codemode

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// Bounds on what a tenant may register.
const (
	DefaultTimeoutMS   = 30_000
	MaxTimeoutMS       = 300_000
	MinTimeoutMS       = 100
	maxSecrets         = 32
	maxSecretBytes     = 8 << 10
	maxPatterns        = 100
	maxDescription     = 1000
	maxCommandArgs     = 64
	maxCommandArgBytes = 4096
)

// NamePattern is an upstream server's name: 1-40 lowercase letters, digits
// and _, starting with a letter (the module code imports: servers.<name>).
const NamePattern = `^[a-z][a-z0-9_]{0,39}$`

var (
	nameRE       = regexp.MustCompile(NamePattern)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Registration registers an upstream MCP server: a URL (streamable HTTP)
// or a command the operator allows (stdio), with the headers or
// environment it needs. Headers and environment are credentials: stored
// sealed, never shown again.
type Registration struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	URL         string            `json:"url,omitempty"`
	Command     []string          `json:"command,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	AllowTools  []string          `json:"allow_tools,omitempty"`
	DenyTools   []string          `json:"deny_tools,omitempty"`
	TimeoutMS   int               `json:"timeout_ms,omitempty"`
}

// Update changes some of a server's settings; absent fields stay as they
// are. Headers or Env, when present, replace the stored ones whole.
type Update struct {
	Description *string            `json:"description,omitempty"`
	URL         *string            `json:"url,omitempty"`
	Command     *[]string          `json:"command,omitempty"`
	Headers     *map[string]string `json:"headers,omitempty"`
	Env         *map[string]string `json:"env,omitempty"`
	AllowTools  *[]string          `json:"allow_tools,omitempty"`
	DenyTools   *[]string          `json:"deny_tools,omitempty"`
	TimeoutMS   *int               `json:"timeout_ms,omitempty"`
}

// secrets is what is sealed: everything that may carry a credential.
type secrets struct {
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

func (s secrets) names() []string {
	var out []string
	for k := range s.Headers {
		out = append(out, "header:"+k)
	}
	for k := range s.Env {
		out = append(out, "env:"+k)
	}
	slices.Sort(out)
	return out
}

func sealContext(tenantID, name string) string { return "mcp-server:" + tenantID + ":" + name }

// Server is a registered server as the API shows it: credentials appear by
// name only.
type Server struct {
	Name             string     `json:"name"`
	Description      string     `json:"description"`
	Transport        string     `json:"transport"`
	URL              string     `json:"url,omitempty"`
	Command          []string   `json:"command,omitempty"`
	Headers          []string   `json:"headers"`
	Env              []string   `json:"env"`
	AllowTools       []string   `json:"allow_tools"`
	DenyTools        []string   `json:"deny_tools"`
	TimeoutMS        int        `json:"timeout_ms"`
	Tools            int        `json:"tools"`
	ToolsRefreshedAt *time.Time `json:"tools_refreshed_at"`
	ToolsError       string     `json:"tools_error,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
}

// View is the API's view of a stored server.
func View(m ServerRecord) Server {
	s := Server{Name: m.Name, Description: m.Description, Transport: m.Transport, URL: m.DisplayURL,
		Command: m.Command, Headers: []string{}, Env: []string{}, AllowTools: orEmpty(m.AllowTools),
		DenyTools: orEmpty(m.DenyTools), TimeoutMS: m.TimeoutMS, Tools: m.ToolCount,
		ToolsRefreshedAt: m.ToolsRefreshedAt, ToolsError: m.ToolsError, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if len(s.Command) == 0 {
		s.Command = nil
	}
	for _, n := range m.SecretNames {
		if h, ok := strings.CutPrefix(n, "header:"); ok {
			s.Headers = append(s.Headers, h)
		} else if e, ok := strings.CutPrefix(n, "env:"); ok {
			s.Env = append(s.Env, e)
		}
	}
	return s
}

func orEmpty(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

// Allowed reports whether the server's allow and deny lists let code call
// tool: allowed when the allow list is empty or a pattern matches, and no
// deny pattern matches. Patterns are path.Match globs ("get_*").
func Allowed(m ServerRecord, tool string) bool {
	return allowed(m.AllowTools, m.DenyTools, tool)
}

func allowed(allow, deny []string, tool string) bool {
	match := func(pats []string) bool {
		for _, p := range pats {
			if ok, _ := path.Match(p, tool); ok {
				return true
			}
		}
		return false
	}
	return (len(allow) == 0 || match(allow)) && !match(deny)
}

// validate checks a registration against the operator's configuration.
func (r *Registration) validate(cfg Config) error {
	if !nameRE.MatchString(r.Name) {
		return &jobs.FieldError{Field: "name", Message: "must be 1-40 lowercase letters, digits and '_', starting with a letter (it becomes the module servers." + "<name>)"}
	}
	r.Description = strings.TrimSpace(r.Description)
	if len(r.Description) > maxDescription || strings.ContainsRune(r.Description, 0) {
		return &jobs.FieldError{Field: "description", Message: fmt.Sprintf("must be at most %d bytes, without NUL", maxDescription)}
	}
	switch {
	case r.URL != "" && len(r.Command) > 0:
		return &jobs.FieldError{Field: "url", Message: "and command are exclusive: a server is reached over streamable HTTP (url) or stdio (command)"}
	case r.URL == "" && len(r.Command) == 0:
		return &jobs.FieldError{Field: "url", Message: "or command is required"}
	case r.URL != "":
		if err := validateURL(r.URL); err != nil {
			return err
		}
		if len(r.Env) > 0 {
			return &jobs.FieldError{Field: "env", Message: "is for stdio servers (command); an HTTP server takes headers"}
		}
	default:
		if err := cfg.checkCommand(r.Command); err != nil {
			return err
		}
		if len(r.Headers) > 0 {
			return &jobs.FieldError{Field: "headers", Message: "are for HTTP servers (url); a stdio server takes env"}
		}
	}
	if err := validateSecrets("headers", r.Headers, headerNameRE); err != nil {
		return err
	}
	if err := validateSecrets("env", r.Env, envNameRE); err != nil {
		return err
	}
	for k := range r.Env {
		if err := cfg.checkEnvName(k); err != nil {
			return &jobs.FieldError{Field: "env", Message: err.Error()}
		}
	}
	for field, pats := range map[string][]string{"allow_tools": r.AllowTools, "deny_tools": r.DenyTools} {
		if len(pats) > maxPatterns {
			return &jobs.FieldError{Field: field, Message: fmt.Sprintf("must have at most %d patterns", maxPatterns)}
		}
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil || p == "" || len(p) > 200 || strings.ContainsRune(p, 0) {
				return &jobs.FieldError{Field: field, Message: fmt.Sprintf("pattern %q is not a valid glob", p)}
			}
		}
	}
	if r.TimeoutMS == 0 {
		r.TimeoutMS = DefaultTimeoutMS
	}
	if r.TimeoutMS < MinTimeoutMS || r.TimeoutMS > MaxTimeoutMS {
		return &jobs.FieldError{Field: "timeout_ms", Message: fmt.Sprintf("must be between %d and %d", MinTimeoutMS, MaxTimeoutMS)}
	}
	return nil
}

func validateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 {
		return &jobs.FieldError{Field: "url", Message: "must be an http:// or https:// URL of a streamable HTTP MCP endpoint"}
	}
	if u.User != nil {
		return &jobs.FieldError{Field: "url", Message: "must not carry credentials; put them in headers (e.g. Authorization)"}
	}
	return nil
}

// displayURL drops what may carry a credential: query and fragment.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

func validateSecrets(field string, m map[string]string, nameRE *regexp.Regexp) error {
	if len(m) > maxSecrets {
		return &jobs.FieldError{Field: field, Message: fmt.Sprintf("must have at most %d entries", maxSecrets)}
	}
	for k, v := range m {
		if !nameRE.MatchString(k) {
			return &jobs.FieldError{Field: field, Message: fmt.Sprintf("name %q is invalid", k)}
		}
		if len(v) > maxSecretBytes || strings.ContainsAny(v, "\r\n\x00") {
			return &jobs.FieldError{Field: field, Message: fmt.Sprintf("value of %q must be at most %d bytes, without line breaks or NUL", k, maxSecretBytes)}
		}
		if field == "headers" && isHopHeader(k) {
			return &jobs.FieldError{Field: field, Message: fmt.Sprintf("%q is set by gantry itself", k)}
		}
	}
	return nil
}

func isHopHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Host", "Content-Length", "Content-Type", "Connection", "Transfer-Encoding", "Mcp-Session-Id", "Mcp-Protocol-Version", "Accept":
		return true
	}
	return false
}

// apply merges an update into a registration.
func (u Update) apply(r *Registration) {
	if u.Description != nil {
		r.Description = *u.Description
	}
	if u.URL != nil {
		r.URL = *u.URL
		if r.URL != "" {
			r.Command = nil
		}
	}
	if u.Command != nil {
		r.Command = *u.Command
		if len(r.Command) > 0 {
			r.URL = ""
		}
	}
	if u.Headers != nil {
		r.Headers = *u.Headers
	}
	if u.Env != nil {
		r.Env = *u.Env
	}
	if u.AllowTools != nil {
		r.AllowTools = *u.AllowTools
	}
	if u.DenyTools != nil {
		r.DenyTools = *u.DenyTools
	}
	if u.TimeoutMS != nil {
		r.TimeoutMS = *u.TimeoutMS
	}
}
