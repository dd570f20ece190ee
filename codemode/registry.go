package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gantryhq/gantry/secret"
)

// Error is a code-mode failure the caller (the sandbox's code, or an API
// client) is told about: Code is stable, Message says what happened.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Error codes.
const (
	CodeUnknownServer  = "unknown_server"
	CodeUnknownTool    = "unknown_tool"
	CodeDenied         = "denied"
	CodeBudgetExceeded = "budget_exceeded"
	CodeTimeout        = "timeout"
	CodeUpstreamError  = "upstream_error"
	CodeBadRequest     = "bad_request"
	CodeTooLarge       = "too_large"
	CodeUnavailable    = "unavailable"
	// CodeToolError is a tool that ran and reported an error.
	CodeToolError = "error"
)

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Registry is the tenants' upstream servers: registering them, their
// cached tool lists, and calls to them.
type Registry struct {
	st  Store
	box *secret.Box
	up  *Upstreams
	cfg Config
	log *slog.Logger
}

// NewRegistry returns a registry. box may be nil (no GANTRY_SECRET_KEY):
// then nothing can be registered or called, with a clear error.
func NewRegistry(st Store, box *secret.Box, up *Upstreams, log *slog.Logger) *Registry {
	return &Registry{st: st, box: box, up: up, cfg: up.cfg, log: log}
}

// Config returns the registry's configuration.
func (r *Registry) Config() Config { return r.cfg }

func (r *Registry) requireKey() error {
	if !r.box.Enabled() {
		return errorf(CodeUnavailable, "code mode is off: the operator has not set GANTRY_SECRET_KEY, which seals upstream credentials")
	}
	return nil
}

func (r *Registry) seal(tenantID string, reg Registration) (ServerRecord, error) {
	sec := secrets{URL: reg.URL, Headers: reg.Headers, Env: reg.Env}
	data, err := json.Marshal(sec)
	if err != nil {
		return ServerRecord{}, err
	}
	sealed, err := r.box.Seal(data, sealContext(tenantID, reg.Name))
	if err != nil {
		return ServerRecord{}, err
	}
	m := ServerRecord{TenantID: tenantID, Name: reg.Name, Description: reg.Description, SecretSealed: sealed,
		SecretNames: sec.names(), AllowTools: reg.AllowTools, DenyTools: reg.DenyTools, TimeoutMS: reg.TimeoutMS}
	if reg.URL != "" {
		m.Transport, m.DisplayURL = "http", displayURL(reg.URL)
	} else {
		m.Transport, m.Command = "stdio", reg.Command
	}
	return m, nil
}

func (r *Registry) open(m ServerRecord) (secrets, error) {
	var sec secrets
	data, err := r.box.Open(m.SecretSealed, sealContext(m.TenantID, m.Name))
	if err != nil {
		return sec, err
	}
	return sec, json.Unmarshal(data, &sec)
}

// probe connects to a server that is not registered yet (or whose
// connection settings change) and lists its tools, without keeping the
// connection: a failed registration must leave nothing behind. A stdio
// server is started by a runner when this process has no Launcher.
func (r *Registry) probe(ctx context.Context, m ServerRecord, sec secrets) ([]Tool, error) {
	if m.Transport == "stdio" && r.cfg.Launcher == nil {
		ctx, cancel := context.WithTimeout(ctx, callTimeout(m)+5*time.Second)
		defer cancel()
		return r.cfg.Remote.list(ctx, m)
	}
	return r.probeHere(ctx, m, sec)
}

// probeHere is probe in this process.
func (r *Registry) probeHere(ctx context.Context, m ServerRecord, sec secrets) ([]Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout(m))
	defer cancel()
	c, err := r.up.connect(ctx, m, sec)
	if err != nil {
		return nil, &UpstreamError{Server: m.Name, Err: err}
	}
	defer c.Close()
	return fetchTools(ctx, c, m, r.cfg.MaxTools, r.log)
}

// callTimeout is how long connecting to m and listing its tools may take:
// its timeout, plus the time a stdio server's sandbox takes to start.
func callTimeout(m ServerRecord) time.Duration {
	d := time.Duration(m.TimeoutMS)*time.Millisecond + 5*time.Second
	if m.Transport == "stdio" {
		d += launchAllowance
	}
	return d
}

// Register registers a server: its upstream must answer with its tool
// list, so a typo in a URL or token fails now, not in a job.
func (r *Registry) Register(ctx context.Context, tenantID string, reg Registration) (Server, error) {
	if err := r.requireKey(); err != nil {
		return Server{}, err
	}
	if err := reg.validate(r.cfg); err != nil {
		return Server{}, err
	}
	m, err := r.seal(tenantID, reg)
	if err != nil {
		return Server{}, err
	}
	if _, err := r.st.GetMCPServer(ctx, tenantID, reg.Name); err == nil {
		return Server{}, fmt.Errorf("%w: an MCP server named %q is already registered", ErrConflict, reg.Name)
	}
	tools, err := r.probe(ctx, m, secrets{URL: reg.URL, Headers: reg.Headers, Env: reg.Env})
	if err != nil {
		return Server{}, err
	}
	out, err := r.st.CreateMCPServer(ctx, m, tools)
	if err != nil {
		return Server{}, err
	}
	r.log.Info("MCP server registered", "tenant_id", tenantID, "server", m.Name, "transport", m.Transport, "tools", len(tools))
	return View(out), nil
}

// Update changes a server's settings. When how it is reached changes (URL,
// command, headers, env), the upstream is asked for its tools again.
func (r *Registry) Update(ctx context.Context, tenantID, name string, upd Update) (Server, error) {
	if err := r.requireKey(); err != nil {
		return Server{}, err
	}
	cur, err := r.st.GetMCPServer(ctx, tenantID, name)
	if err != nil {
		return Server{}, err
	}
	sec, err := r.open(cur)
	if err != nil {
		return Server{}, err
	}
	reg := Registration{Name: name, Description: cur.Description, URL: sec.URL, Command: cur.Command,
		Headers: sec.Headers, Env: sec.Env, AllowTools: cur.AllowTools, DenyTools: cur.DenyTools, TimeoutMS: cur.TimeoutMS}
	upd.apply(&reg)
	if err := reg.validate(r.cfg); err != nil {
		return Server{}, err
	}
	m, err := r.seal(tenantID, reg)
	if err != nil {
		return Server{}, err
	}
	m.Version = cur.Version
	var tools []Tool
	if upd.URL != nil || upd.Command != nil || upd.Headers != nil || upd.Env != nil {
		if tools, err = r.probe(ctx, m, secrets{URL: reg.URL, Headers: reg.Headers, Env: reg.Env}); err != nil {
			return Server{}, err
		}
		if tools == nil {
			tools = []Tool{}
		}
	}
	out, err := r.st.UpdateMCPServer(ctx, m, tools, func(tool string) bool { return allowed(reg.AllowTools, reg.DenyTools, tool) })
	if err != nil {
		return Server{}, err
	}
	return View(out), nil
}

// Get returns one server.
func (r *Registry) Get(ctx context.Context, tenantID, name string) (Server, error) {
	m, err := r.st.GetMCPServer(ctx, tenantID, name)
	if err != nil {
		return Server{}, err
	}
	return View(m), nil
}

// List returns the tenant's servers.
func (r *Registry) List(ctx context.Context, tenantID string) ([]Server, error) {
	ms, err := r.st.ListMCPServers(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(ms))
	for _, m := range ms {
		out = append(out, View(m))
	}
	return out, nil
}

// Delete removes a server.
func (r *Registry) Delete(ctx context.Context, tenantID, name string) error {
	return r.st.DeleteMCPServer(ctx, tenantID, name)
}

// Refresh fetches a server's tool list again. A failure is recorded on
// the server (tools_error) and returned; the old list stays.
func (r *Registry) Refresh(ctx context.Context, tenantID, name string) (Server, error) {
	if err := r.requireKey(); err != nil {
		return Server{}, err
	}
	m, err := r.st.GetMCPServer(ctx, tenantID, name)
	if err != nil {
		return Server{}, err
	}
	if err := r.refresh(ctx, m); err != nil {
		return Server{}, err
	}
	return r.Get(ctx, tenantID, name)
}

func (r *Registry) refresh(ctx context.Context, m ServerRecord) error {
	var tools []Tool
	var err error
	if m.Transport == "stdio" && r.cfg.Launcher == nil {
		tools, err = r.probe(ctx, m, secrets{})
	} else {
		var sec secrets
		if sec, err = r.open(m); err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, callTimeout(m))
		tools, err = r.up.listTools(lctx, m, sec)
		cancel()
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if serr := r.st.SetMCPTools(context.WithoutCancel(ctx), m.TenantID, m.Name, m.Version, tools, msg); serr != nil {
		return serr
	}
	return err
}

// RefreshStale refreshes the tool lists older than the configured TTL,
// across tenants; ingress replicas share the work through the database.
func (r *Registry) RefreshStale(ctx context.Context) {
	if !r.box.Enabled() {
		return
	}
	ms, err := r.st.ClaimStaleMCPServers(ctx, r.cfg.ToolsTTL, 20)
	if err != nil {
		r.log.Warn("claim stale MCP servers", "err", err)
		return
	}
	for _, m := range ms {
		if err := r.refresh(ctx, m); err != nil {
			r.log.Warn("refresh MCP server tools", "tenant_id", m.TenantID, "server", m.Name, "err", err)
		}
	}
}

// Detail levels of tool descriptions, smallest first.
const (
	DetailName        = "name"
	DetailDescription = "description"
	DetailFull        = "full"
)

// ValidDetail reports whether d is a detail level ("" means description).
func ValidDetail(d string) bool {
	return d == "" || d == DetailName || d == DetailDescription || d == DetailFull
}

// ToolInfo describes a tool at a detail level: name only; with its
// description; or with its input and output schemas too.
type ToolInfo struct {
	Server       string          `json:"server"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

func info(t Tool, detail string) ToolInfo {
	ti := ToolInfo{Server: t.Server, Name: t.Name}
	if detail == DetailName {
		return ti
	}
	ti.Description = t.Description
	if detail == DetailFull {
		ti.InputSchema, ti.OutputSchema = t.InputSchema, t.OutputSchema
		return ti
	}
	// The description level keeps to the first paragraph: enough to
	// choose a tool, not to call it.
	if i := strings.Index(ti.Description, "\n\n"); i > 0 {
		ti.Description = ti.Description[:i]
	}
	if len(ti.Description) > 300 {
		ti.Description = strings.ToValidUTF8(ti.Description[:300], "") + "…"
	}
	return ti
}

// Search ranks the tenant's allowed tools against query (empty: every
// tool, by server and name) and describes them at the detail level.
func (r *Registry) Search(ctx context.Context, tenantID, query, detail string, limit int) ([]ToolInfo, error) {
	if !ValidDetail(detail) {
		return nil, errorf(CodeBadRequest, "detail must be name, description or full")
	}
	var tools []Tool
	if strings.TrimSpace(query) == "" {
		all, err := r.st.MCPTools(ctx, tenantID, "")
		if err != nil {
			return nil, err
		}
		tools = all[:min(limit, len(all))]
	} else {
		hits, err := r.st.SearchMCPTools(ctx, tenantID, query, limit)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			tools = append(tools, h.Tool)
		}
	}
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		out = append(out, info(t, detail))
	}
	return out, nil
}

// Tools lists the allowed tools of one server.
func (r *Registry) Tools(ctx context.Context, tenantID, server, detail string) ([]ToolInfo, error) {
	if !ValidDetail(detail) {
		return nil, errorf(CodeBadRequest, "detail must be name, description or full")
	}
	if _, err := r.server(ctx, tenantID, server); err != nil {
		return nil, err
	}
	tools, err := r.st.MCPTools(ctx, tenantID, server)
	if err != nil {
		return nil, err
	}
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		out = append(out, info(t, detail))
	}
	return out, nil
}

// Describe returns one allowed tool in full.
func (r *Registry) Describe(ctx context.Context, tenantID, server, tool string) (ToolInfo, error) {
	m, err := r.server(ctx, tenantID, server)
	if err != nil {
		return ToolInfo{}, err
	}
	t, err := r.tool(ctx, m, tool)
	if err != nil {
		return ToolInfo{}, err
	}
	return info(t, DetailFull), nil
}

func (r *Registry) server(ctx context.Context, tenantID, name string) (ServerRecord, error) {
	m, err := r.st.GetMCPServer(ctx, tenantID, name)
	if errors.Is(err, ErrNotFound) {
		return m, errorf(CodeUnknownServer, "no MCP server named %q is registered (see list_servers())", name)
	}
	return m, err
}

// tool finds an allowed tool in the cached list, refreshing the list once
// when the tool is missing from it and the list is more than a minute old.
func (r *Registry) tool(ctx context.Context, m ServerRecord, name string) (Tool, error) {
	if !Allowed(m, name) {
		return Tool{}, errorf(CodeDenied, "tool %s.%s is not allowed for this tenant (allow/deny lists of server %q)", m.Name, name, m.Name)
	}
	t, err := r.st.GetMCPTool(ctx, m.TenantID, m.Name, name)
	if errors.Is(err, ErrNotFound) && (m.ToolsRefreshedAt == nil || time.Since(*m.ToolsRefreshedAt) > time.Minute) {
		if rerr := r.refresh(ctx, m); rerr == nil {
			t, err = r.st.GetMCPTool(ctx, m.TenantID, m.Name, name)
		}
	}
	if errors.Is(err, ErrNotFound) {
		return t, errorf(CodeUnknownTool, "MCP server %q has no tool %q (see search_tools() or list_tools(%q))", m.Name, name, m.Name)
	}
	return t, err
}
