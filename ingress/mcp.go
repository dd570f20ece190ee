package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	ms := server.NewMCPServer("gantry", s.cfg.Version,
		server.WithTitle("gantry code execution"),
		server.WithInstructions(mcpInstructions),
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithInputSchemaValidation(),
		server.WithOutputSchemaValidation(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithHooks(hooks),
	)
	s.addJobTools(ms)
	s.addPrompt(ms)
	s.addResources(ms)
	s.mcp = ms

	h := server.NewStreamableHTTPServer(ms,
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
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
			w.Header().Set("WWW-Authenticate", `Bearer realm="gantry"`)
			s.writeError(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpPrincipalKey{}, p)))
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
