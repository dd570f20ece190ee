package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
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
	taskHooks := &server.TaskHooks{}
	taskHooks.AddOnTaskCreated(func(ctx context.Context, m server.TaskMetrics) {
		if slot := taskSlotFrom(ctx); slot != nil {
			slot.set(m.TaskID)
		}
	})
	taskHooks.AddOnTaskCancelled(func(_ context.Context, m server.TaskMetrics) { s.tasks.cancel(m.TaskID) })
	tools := newToolCatalog()
	ms := server.NewMCPServer("gantry", s.cfg.Version,
		server.WithTitle("gantry code execution"),
		server.WithInstructions(mcpInstructions),
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithTaskCapabilities(true, true, true),
		// Arguments are checked by the catalog, in plain words, for calls
		// and tasks alike.
		server.WithToolHandlerMiddleware(tools.validate),
		server.WithToolFilter(tools.filter),
		server.WithOutputSchemaValidation(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithHooks(hooks),
		server.WithTaskHooks(taskHooks),
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
			ctx = context.WithValue(ctx, taskSlotKey{}, &taskSlot{})
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
		ctx := context.WithValue(r.Context(), mcpPrincipalKey{}, p)
		h.ServeHTTP(w, r.WithContext(context.WithValue(ctx, toolsetsKey{}, sel)))
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

// Task-augmented calls. mcp-go runs a task in this process and gives the
// tool handler no task id and a context that ends with the HTTP request, so
// the id is caught when the task is created (one tool call per request) and
// tasks/cancel is routed to the job through taskRegistry.

type taskSlotKey struct{}

type taskSlot struct {
	mu sync.Mutex
	id string
}

func (t *taskSlot) set(id string) {
	t.mu.Lock()
	t.id = id
	t.mu.Unlock()
}

func (t *taskSlot) get() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

func taskSlotFrom(ctx context.Context) *taskSlot {
	t, _ := ctx.Value(taskSlotKey{}).(*taskSlot)
	return t
}

// taskRegistry maps running tasks to a channel closed when they are
// cancelled.
type taskRegistry struct {
	mu      sync.Mutex
	running map[string]chan struct{}
}

func (r *taskRegistry) register(taskID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	if taskID == "" {
		return ch, func() {}
	}
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]chan struct{}{}
	}
	r.running[taskID] = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.running, taskID)
		r.mu.Unlock()
	}
}

func (r *taskRegistry) cancel(taskID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.running[taskID]; ok {
		close(ch)
		delete(r.running, taskID)
	}
}
