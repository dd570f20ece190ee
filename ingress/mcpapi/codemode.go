package mcpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/service"
)

// The MCP code-mode tools' arguments (add_mcp_server's are
// codemode.Registration, as POST /v1/mcp-servers takes it).
type (
	searchToolsArgs struct {
		Query  string `json:"query,omitempty"`
		Detail string `json:"detail,omitempty"`
		Limit  int    `json:"limit,omitempty"`
	}
	mcpServerArgs struct {
		Name string `json:"name"`
	}
	noArgs struct{}
)

func (s *Server) addCodeModeTools(ms *server.MCPServer, tools *toolCatalog) {
	tools.add(ms, toolsetCode, mcp.NewTool("search_tools",
		mcp.WithDescription("Find your MCP servers' tools, for code run by execute_code to call. "+
			"detail: name, description (default), or full: with schemas, for tools you will call."),
		mcp.WithTitleAnnotation("Search upstream tools"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[searchToolsArgs](toolNote{props: map[string]js{
			"detail": {"enum": []any{codemode.DetailName, codemode.DetailDescription, codemode.DetailFull}},
			"limit":  {"minimum": 1, "maximum": 100},
		}}),
	), s.toolSearchTools)

	tools.add(ms, toolsetRegistry, mcp.NewTool("list_mcp_servers",
		mcp.WithDescription("Your upstream MCP servers for code mode, with their tool counts (never their credentials)."),
		mcp.WithTitleAnnotation("List upstream MCP servers"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[noArgs](toolNote{}),
		outputOf[httpapi.MCPServerList](toolNote{}),
	), s.toolListMCPServers)

	tools.add(ms, toolsetRegistry, mcp.NewTool("add_mcp_server",
		mcp.WithDescription("Register an upstream MCP server for code mode: a streamable HTTP url (with headers such as Authorization) or an allowed stdio command (with env). "+
			"gantry lists its tools once; headers and env are stored encrypted, never shown again nor put in a sandbox."),
		mcp.WithTitleAnnotation("Register upstream MCP server"),
		mcp.WithDestructiveHintAnnotation(false),
		inputOf[codemode.Registration](toolNote{props: map[string]js{
			"name":        {"pattern": codemode.NamePattern, "description": "the module name in code: servers.<name>"},
			"description": {"maxLength": 1000},
			"allow_tools": {"description": "globs; default all"},
			"deny_tools":  {"description": "globs"},
			"timeout_ms":  {"minimum": 100, "maximum": 300000},
		}}),
		outputOf[codemode.Server](toolNote{}),
	), s.toolAddMCPServer)

	tools.add(ms, toolsetRegistry, mcp.NewTool("remove_mcp_server",
		mcp.WithDescription("Remove an upstream MCP server and its stored credentials."),
		mcp.WithTitleAnnotation("Remove upstream MCP server"),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[mcpServerArgs](toolNote{}),
	), s.toolRemoveMCPServer)
}

// beginCodeMode is begin for the code-mode tools: it also answers at once
// when code mode is not configured.
func (s *Server) beginCodeMode(ctx context.Context, req mcp.CallToolRequest, args any) (service.Principal, *mcp.CallToolResult, error) {
	p, res, err := begin(ctx, req, args)
	if res != nil || err != nil {
		return p, res, err
	}
	if err := s.svc.CodeMode().Check(); err != nil {
		return p, toolError(err), nil
	}
	return p, nil, nil
}

func (s *Server) toolSearchTools(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args searchToolsArgs
	p, res, err := s.beginCodeMode(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	if len(args.Query) > 500 {
		return toolError(service.BadRequest("query", "query is longer than 500 characters")), nil
	}
	if args.Limit == 0 {
		args.Limit = 10
	}
	if err := service.CheckText("query", args.Query); err != nil {
		return toolError(err), nil
	}
	tools, err := s.svc.CodeMode().SearchTools(ctx, p, args.Query, args.Detail, min(args.Limit, 100))
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"tools": tools}, toolsText(tools, args.Detail)), nil
}

// toolsText is the text form of a tool list: one line per tool, and at
// full detail a signature with the arguments' notes (the structured result
// has the JSON schemas).
func toolsText(tools []codemode.ToolInfo, detail string) string {
	if len(tools) == 0 {
		return "no tool matches; try other words, or list_mcp_servers\n"
	}
	var b strings.Builder
	for _, t := range tools {
		if detail == codemode.DetailFull {
			b.WriteString("- " + codemode.Signature(t) + "\n")
			continue
		}
		fmt.Fprintf(&b, "- %s.%s", t.Server, t.Name)
		if t.Description != "" {
			b.WriteString(": " + strings.ReplaceAll(t.Description, "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (s *Server) toolListMCPServers(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args noArgs
	p, res, err := s.beginCodeMode(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	list, err := s.svc.CodeMode().MCPServers(ctx, p)
	if err != nil {
		return toolError(err), nil
	}
	var b strings.Builder
	for _, m := range list {
		fmt.Fprintf(&b, "- %s (%s, %d tools): %s\n", m.Name, m.Transport, m.Tools, m.Description)
	}
	if len(list) == 0 {
		b.WriteString("no MCP servers are registered; add one with add_mcp_server\n")
	}
	return mcp.NewToolResultStructured(httpapi.MCPServerList{Servers: list}, b.String()), nil
}

func (s *Server) toolAddMCPServer(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args codemode.Registration
	p, res, err := s.beginCodeMode(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	srv, err := s.svc.CodeMode().RegisterMCPServer(ctx, p, args)
	if err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultStructured(srv, fmt.Sprintf("registered %s with %d tools; code imports them with `from servers.%s import ...` (Python) or require('servers/%s') (Node)",
		srv.Name, srv.Tools, srv.Name, srv.Name)), nil
}

func (s *Server) toolRemoveMCPServer(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args mcpServerArgs
	p, res, err := s.beginCodeMode(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	if err := s.svc.CodeMode().DeleteMCPServer(ctx, p, args.Name); err != nil {
		return toolError(err), nil
	}
	return mcp.NewToolResultText("removed " + args.Name), nil
}

// codeModePrompt explains code mode, with a worked example, when the
// tenant has upstream servers.
func codeModePrompt(servers []codemode.Server) string {
	if len(servers) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(`
Code mode (calling other tools from your code):
Your code can call the tools of these MCP servers; nothing they return enters your context unless your code prints it:
`)
	for i, m := range servers {
		if i == 20 {
			fmt.Fprintf(&b, "- ...and %d more (list_mcp_servers)\n", len(servers)-i)
			break
		}
		desc := m.Description
		if len(desc) > 120 {
			desc = desc[:117] + "..."
		}
		fmt.Fprintf(&b, "- %s (%d tools): %s\n", m.Name, m.Tools, desc)
	}
	b.WriteString(`- Find a tool with search_tools (detail "name" or "description"); load its schema with detail "full" only when you will call it.
- In Python, import a server's tools as functions: from servers.<server> import <tool>; call them with keyword arguments. In Node: const { <tool> } = require('servers/<server>'); await <tool>({...}).
- gantry.search_tools(query), gantry.describe(server, tool) and gantry.call(server, tool, args) work from code too (import gantry / require('gantry')).
- A failing call raises gantry.ToolError with the server's message. Each run may make limits.tool_calls calls (default 100).
- Join and filter in code, then print one short answer. Example (Python):
    from servers.crm import find_customer, list_orders
    c = find_customer(email="ada@example.com")
    orders = list_orders(customer_id=c["id"])
    late = [o for o in orders["orders"] if o["status"] == "late"]
    print(f"{c['name']}: {len(late)} late orders, {sum(o['total'] for o in late):.2f} EUR")
`)
	return b.String()
}
