package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// The MCP surface at /mcp: the same API keys, tenants and job path as the
// HTTP API, spoken as MCP tools, a prompt and resources. Nothing here keeps
// state in the MCP transport session: clients on the 2026-07-28 protocol
// have none, and any ingress replica must be able to answer any request.

type mcpPrincipalKey struct{}

func principalFrom(ctx context.Context) (store.Principal, bool) {
	p, ok := ctx.Value(mcpPrincipalKey{}).(store.Principal)
	return p, ok
}

// newMCP builds the MCP server and its streamable HTTP handler, wrapped so
// that a request without a valid key is answered 401 before any MCP
// handling.
func (s *Server) newMCP() http.Handler {
	hooks := &server.Hooks{}
	hooks.AddAfterListResources(s.listJobResources)
	sessions := newMCPSessions()
	sessions.hook(hooks)
	tools := newToolCatalog()
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
		// Arguments are checked by the catalog, in plain words, for calls
		// and tasks alike.
		server.WithToolHandlerMiddleware(tools.validate),
		server.WithToolFilter(tools.filter),
		server.WithOutputSchemaValidation(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithHooks(hooks),
	)
	s.addJobTools(ms, tools)
	s.addSessionTools(ms, tools)
	s.addSkillTools(ms, tools)
	s.addSkillResources(ms)
	s.addCodeModeTools(ms, tools)
	s.addPrompt(ms)
	s.addResources(ms)
	s.mcp = ms

	h := server.NewStreamableHTTPServer(ms,
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			ctx = context.WithValue(ctx, toolsetsKey{}, toolsetsFrom(r.Context()))
			if p, ok := principalFrom(r.Context()); ok {
				return context.WithValue(ctx, mcpPrincipalKey{}, p)
			}
			return ctx
		}),
		// Transport state of clients that vanish without DELETE is reclaimed.
		server.WithSessionIdleTTL(10*time.Minute),
		server.WithHeartbeatInterval(20*time.Second),
		server.WithStreamableHTTPLogger(s.log.With("component", "mcp")),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			s.unauthorized(w, r, err)
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
				var apiErr *APIError
				var maxErr *http.MaxBytesError
				if !errors.As(err, &apiErr) && !errors.As(err, &maxErr) {
					err = badRequest("", "could not read the request body: %v", err)
				}
				s.writeError(w, r, err)
				return
			}
			if s.serveTask(w, r, body, p, sel) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !sessions.allows(id, p.TenantID) {
			s.writeError(w, r, &APIError{Status: http.StatusNotFound, Code: CodeNotFound,
				Message: "no such MCP session (it belongs to no one with this key); initialize a new one"})
			return
		}
		ctx := context.WithValue(r.Context(), mcpPrincipalKey{}, p)
		h.ServeHTTP(w, r.WithContext(context.WithValue(ctx, toolsetsKey{}, sel)))
		// A new session's id comes back in the answer's header.
		sessions.bind(w.Header().Get(server.HeaderKeySessionID), p.TenantID)
	})
}

const mcpInstructions = `gantry runs code in isolated sandboxes (no network). Use execute_code to run Python, bash or Node and get its output and the files it wrote to out/ as download links. Read the agent_system_prompt prompt for guidance.`

// toolError turns an error into a tool result with isError set: bad
// arguments and unknown jobs are the model's to fix, not protocol failures.
func toolError(err error) *mcp.CallToolResult {
	e, internal := toAPIError(err)
	if internal {
		return mcp.NewToolResultError("internal error; the job may or may not have been affected, check with get_job")
	}
	return mcp.NewToolResultError(e.Message)
}

// begin resolves a tool call's tenant and decodes its arguments into args.
// A non-nil result is the answer to give at once (the arguments were bad).
func begin(ctx context.Context, req mcp.CallToolRequest, args any) (store.Principal, *mcp.CallToolResult, error) {
	p, ok := principalFrom(ctx)
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
