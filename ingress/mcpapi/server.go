// Package mcpapi is gantry's MCP surface at /mcp: the same API keys,
// tenants and operations as the HTTP API, spoken as MCP tools, a prompt
// and resources, and MCP tasks answered from the job store. It is an
// adapter over the service (ingress/service): each tool decodes its
// arguments, makes one call of the service and renders the answer. Nothing
// here keeps state in the MCP transport session: clients on the 2026-07-28
// protocol have none, and any ingress replica must be able to answer any
// request.
package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/tracing"
)

// Config is the MCP surface's own configuration.
type Config struct {
	// Version is reported to MCP clients.
	Version string
	// MaxBodyBytes caps a request's body (413 beyond).
	MaxBodyBytes int64
	// TaskInlineWait is how long execute_code waits for its job before it
	// answers a client of the tasks extension with a task instead.
	TaskInlineWait time.Duration
	// Tracer makes a span of each tool call, under the request's (nil:
	// none).
	Tracer trace.TracerProvider
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.TaskInlineWait == 0 {
		c.TaskInlineWait = 5 * time.Second
	}
	return c
}

// Server serves MCP over the service. It is an http.Handler for /mcp,
// mounted behind the HTTP API's key check: the caller is in the request's
// context (service.PrincipalFrom).
type Server struct {
	cfg   Config
	log   *slog.Logger
	svc   *service.Service
	mcp   *server.MCPServer
	tools *toolCatalog
	// streamable is mcp-go's streamable HTTP handler.
	streamable http.Handler
	// sessions binds each transport session to the tenant that opened it.
	sessions *mcpSessions
}

// New builds the MCP server: its tools, prompt and resources, and the
// streamable HTTP transport.
func New(cfg Config, log *slog.Logger, svc *service.Service) *Server {
	s := &Server{cfg: cfg.WithDefaults(), log: log, svc: svc, sessions: newMCPSessions()}
	hooks := &server.Hooks{}
	hooks.AddAfterListResources(s.listJobResources)
	s.sessions.hook(hooks)
	tools := newToolCatalog()
	tools.environments = s.environmentNames
	s.tools = tools
	ms := server.NewMCPServer("gantry", s.cfg.Version,
		server.WithTitle("gantry code execution"),
		server.WithInstructions(mcpInstructions),
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		// Tasks are answered by mcp_tasks.go from the store, never by
		// mcp-go's in-memory task table; these advertise them.
		server.WithTaskCapabilities(true, true, true),
		server.WithExtensions(map[string]any{extTasks: map[string]any{}}),
		// Each call is a span; its arguments are checked by the catalog,
		// in plain words, for calls and tasks alike.
		server.WithToolHandlerMiddleware(s.traced(tracing.Tracer(s.cfg.Tracer, "github.com/gantryhq/gantry/ingress/mcpapi"))),
		server.WithToolHandlerMiddleware(tools.validate),
		server.WithToolFilter(tools.filter),
		server.WithOutputSchemaValidation(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithHooks(hooks),
	)
	s.addJobTools(ms, tools)
	s.addSessionTools(ms, tools)
	s.addLiveStateTools(ms, tools)
	s.addSkillTools(ms, tools)
	s.addSkillResources(ms)
	s.addCodeModeTools(ms, tools)
	s.addPrompt(ms)
	s.addResources(ms)
	s.mcp = ms

	s.streamable = server.NewStreamableHTTPServer(ms,
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			ctx = context.WithValue(ctx, toolsetsKey{}, toolsetsFrom(r.Context()))
			if p, ok := service.PrincipalFrom(r.Context()); ok {
				return service.WithPrincipal(ctx, p)
			}
			return ctx
		}),
		// Transport state of clients that vanish without DELETE is reclaimed.
		server.WithSessionIdleTTL(10*time.Minute),
		server.WithHeartbeatInterval(20*time.Second),
		server.WithStreamableHTTPLogger(s.log.With("component", "mcp")),
	)
	return s
}

// ServeHTTP serves a request to /mcp of the caller in its context: the
// toolsets it selects, the task methods (answered here, from the store),
// and everything else through mcp-go.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := service.PrincipalFrom(r.Context())
	if !ok {
		s.writeError(w, r, errNoPrincipal)
		return
	}
	sel, err := parseToolsets(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var apiErr *service.Error
			var maxErr *http.MaxBytesError
			if !errors.As(err, &apiErr) && !errors.As(err, &maxErr) {
				err = service.BadRequest("", "could not read the request body: %v", err)
			}
			s.writeError(w, r, err)
			return
		}
		if s.serveTask(w, r, body, p, sel) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !s.sessions.allows(id, p.TenantID) {
		s.writeError(w, r, &service.Error{Status: http.StatusNotFound, Code: service.CodeNotFound,
			Message: "no such MCP session (it belongs to no one with this key); initialize a new one"})
		return
	}
	s.streamable.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), toolsetsKey{}, sel)))
	// A new session's id comes back in the answer's header.
	s.sessions.bind(w.Header().Get(server.HeaderKeySessionID), p.TenantID)
}

// environmentNames are the environments the caller may name, the default
// aside; nil when there are none or they cannot be read now.
func (s *Server) environmentNames(ctx context.Context) []string {
	p, ok := service.PrincipalFrom(ctx)
	if !ok {
		return nil
	}
	list, err := s.svc.Environments(ctx, p)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range list {
		if !e.Default {
			names = append(names, e.Name)
		}
	}
	return names
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.WriteError(w, r, s.log, err)
}

const mcpInstructions = `gantry runs code in isolated sandboxes (no network). Use execute_code to run Python, bash or Node and get its output and the files it wrote to out/ as download links. Read the agent_system_prompt prompt for guidance.`

// toolError turns an error into a tool result with isError set: bad
// arguments and unknown jobs are the model's to fix, not protocol failures.
func toolError(err error) *mcp.CallToolResult {
	e, internal := service.ToError(err)
	if internal {
		return mcp.NewToolResultError("internal error; the job may or may not have been affected, check with get_job")
	}
	return mcp.NewToolResultError(e.Message)
}

// begin resolves a tool call's tenant and decodes its arguments into args.
// A non-nil result is the answer to give at once (the arguments were bad).
func begin(ctx context.Context, req mcp.CallToolRequest, args any) (service.Principal, *mcp.CallToolResult, error) {
	p, ok := service.PrincipalFrom(ctx)
	if !ok {
		return p, nil, errNoPrincipal
	}
	if err := bindArgs(req, args); err != nil {
		return p, toolError(err), nil
	}
	return p, nil, nil
}

// bindArgs decodes a tool call's arguments strictly into v.
func bindArgs(req mcp.CallToolRequest, v any) error {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(req.GetArguments()); err != nil {
			return err
		}
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	return decodeStrict(raw, v)
}

var errNoPrincipal = errors.New("no authenticated tenant in the MCP request")

func decodeStrict(raw []byte, v any) error { return jobs.DecodeStrict(bytes.NewReader(raw), v) }

// js is a JSON object (a schema).
type js = map[string]any

// typ is the reflect.Type of T, for the tools' schemas.
func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

// traced makes a span of each tool call, named as OpenTelemetry's MCP
// conventions name it (tools/call execute_code): a job the call submits is
// in its trace.
func (s *Server) traced(tr trace.Tracer) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.Params.Name
			if _, ok := s.tools.toolset[name]; !ok {
				name = "unknown" // a client's words never name a span
			}
			ctx, span := tr.Start(ctx, "tools/call "+name, trace.WithAttributes(
				attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", name)))
			defer span.End()
			res, err := next(ctx, req)
			if err != nil || res != nil && res.IsError {
				span.SetAttributes(attribute.String("error.type", "tool_error"))
			}
			return res, err
		}
	}
}
