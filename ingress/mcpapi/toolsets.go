package mcpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
)

// Toolsets let an MCP client load only the tools it uses, as the GitHub MCP
// server does: the X-MCP-Toolsets header or ?toolsets= on the MCP URL
// (comma-separated; both may be given, and add up) select groups of tools.
// Without either, every tool is listed. `code` is the code-execution-with-MCP
// setup: one tool to run code, one to find the upstream tools that code
// calls, one to fetch what the code wrote. Each tool belongs to one toolset.
const (
	toolsetCode     = "code"
	toolsetJobs     = "jobs"
	toolsetSessions = "sessions"
	toolsetSkills   = "skills"
	toolsetRegistry = "registry"
	toolsetAll      = "all"
)

// toolsetNames lists the toolsets in the order they are documented.
var toolsetNames = []string{toolsetCode, toolsetJobs, toolsetSessions, toolsetSkills, toolsetRegistry}

// toolsetsHeader is the header that selects toolsets (the query parameter
// is "toolsets").
const toolsetsHeader = "X-MCP-Toolsets"

// toolsetSelection is the set of toolsets a request selected; nil means all.
type toolsetSelection map[string]bool

type toolsetsKey struct{}

// parseToolsets reads the selection of a request to /mcp. An unknown name
// is an error naming the header or parameter, so a typo does not silently
// hide every tool.
func parseToolsets(r *http.Request) (toolsetSelection, error) {
	var sel toolsetSelection
	for _, src := range []struct{ field, value string }{
		{toolsetsHeader, strings.Join(r.Header.Values(toolsetsHeader), ",")},
		{"toolsets", strings.Join(r.URL.Query()["toolsets"], ",")},
	} {
		for _, name := range strings.Split(src.value, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			switch {
			case name == "":
				continue
			case name == toolsetAll:
				return nil, nil
			case !slices.Contains(toolsetNames, name):
				return nil, service.BadRequest(src.field, "unknown toolset %q; the toolsets are %s and all", name, strings.Join(toolsetNames, ", "))
			}
			if sel == nil {
				sel = toolsetSelection{}
			}
			sel[name] = true
		}
	}
	return sel, nil
}

// has reports whether the selection includes the toolset.
func (sel toolsetSelection) has(toolset string) bool { return sel == nil || sel[toolset] }

func toolsetsFrom(ctx context.Context) toolsetSelection {
	sel, _ := ctx.Value(toolsetsKey{}).(toolsetSelection)
	return sel
}

// toolCatalog knows each tool's toolset and compiled input schema: it
// filters tools/list and tools/call by the request's toolsets and checks
// arguments before any handler runs.
type toolCatalog struct {
	toolset map[string]string
	schemas map[string]*inputSchema
	// environments are the environments the caller of ctx may name, the
	// default aside (nil: none, or not known).
	environments func(ctx context.Context) []string
}

func newToolCatalog() *toolCatalog {
	return &toolCatalog{toolset: map[string]string{}, schemas: map[string]*inputSchema{}}
}

// add registers a tool of a toolset on ms. A schema that does not compile
// is a bug in gantry, found by the first test that starts a server.
func (c *toolCatalog) add(ms *server.MCPServer, toolset string, tool mcp.Tool, h server.ToolHandlerFunc) {
	schema, err := compileInputSchema(tool.Name, tool.RawInputSchema)
	if err != nil {
		panic(err)
	}
	c.toolset[tool.Name] = toolset
	c.schemas[tool.Name] = schema
	leanAnnotations(&tool.Annotations)
	ms.AddTool(tool, h)
}

// leanAnnotations drops the hints that say what a client assumes anyway
// (the protocol's defaults: not read-only, destructive, not idempotent,
// open world; and for a read-only tool, whether it is destructive or
// idempotent, which then means nothing): every byte of tools/list is in
// the model's context.
func leanAnnotations(a *mcp.ToolAnnotation) {
	is := func(p *bool, v bool) bool { return p != nil && *p == v }
	readOnly := is(a.ReadOnlyHint, true)
	if is(a.ReadOnlyHint, false) {
		a.ReadOnlyHint = nil
	}
	if readOnly || is(a.DestructiveHint, true) {
		a.DestructiveHint = nil
	}
	if readOnly || is(a.IdempotentHint, false) {
		a.IdempotentHint = nil
	}
	if is(a.OpenWorldHint, true) {
		a.OpenWorldHint = nil
	}
}

// filter keeps the tools of the request's toolsets, each listed with the
// arguments the caller can use (listed).
func (c *toolCatalog) filter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	sel := toolsetsFrom(ctx)
	var envs []string
	if c.environments != nil {
		envs = c.environments(ctx)
	}
	out := tools[:0:0]
	for _, t := range tools {
		if sel.has(c.toolset[t.Name]) {
			out = append(out, c.listed(t, sel, envs))
		}
	}
	return out
}

// listed is a tool as tools/list shows it to a caller: every byte of it is
// in the model's context, so an argument the caller cannot use is left
// out. session_id names a session, which only the sessions toolset makes:
// it is listed with that toolset. environment names one of the
// environments the operator registered: it is listed, with their names,
// when the caller may use one. A call may still pass either (the catalog
// checks calls against the whole schema).
func (c *toolCatalog) listed(t mcp.Tool, sel toolsetSelection, envs []string) mcp.Tool {
	if len(t.RawInputSchema) == 0 {
		return t
	}
	var schema js
	if json.Unmarshal(t.RawInputSchema, &schema) != nil {
		return t
	}
	props, _ := schema["properties"].(js)
	changed := false
	if _, ok := props["session_id"]; ok && c.toolset[t.Name] != toolsetSessions && !sel.has(toolsetSessions) {
		delete(props, "session_id")
		changed = true
	}
	if env, ok := props["environment"].(js); ok {
		if len(envs) == 0 {
			delete(props, "environment")
		} else {
			env["enum"] = openapi.Enum(envs)
		}
		changed = true
	}
	if !changed {
		return t
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return t
	}
	t.RawInputSchema = raw
	return t
}

// validate answers a call whose arguments break the tool's input schema
// with a tool error in plain words, and passes the others on.
func (c *toolCatalog) validate(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if schema := c.schemas[req.Params.Name]; schema != nil {
			if msg := schema.check(req); msg != "" {
				return mcp.NewToolResultError(msg), nil
			}
		}
		return next(ctx, req)
	}
}
