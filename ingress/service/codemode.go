package service

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gantryhq/gantry/codemode"
)

// Code mode: the registry of the tenant's upstream MCP servers, whose
// tools a job's code may call, and search across their tools. Every
// operation answers unavailable when code mode is not configured.

// CodeMode is the service's code-mode operations; Service.CodeMode returns
// it.
type CodeMode struct {
	reg *codemode.Registry // nil: code mode is off
}

// CodeMode is the service's code-mode operations.
func (s *Service) CodeMode() *CodeMode { return s.codeMode }

// Check says whether code mode is configured: nil, or the error every
// code-mode operation answers.
func (c *CodeMode) Check() error {
	if c.reg == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "code mode is not configured on this gantry"}
	}
	return nil
}

func mcpServerNotFound(err error, name string) error {
	if errors.Is(err, codemode.ErrNotFound) {
		return NotFound("MCP server " + strconv.Quote(name))
	}
	return err
}

// MCPServers lists the tenant's upstream servers (credentials by name
// only).
func (c *CodeMode) MCPServers(ctx context.Context, p Principal) ([]codemode.Server, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	reg := c.reg
	return reg.List(ctx, p.TenantID)
}

// RegisterMCPServer registers an upstream server for the tenant, listing
// its tools first (a failure leaves nothing behind).
func (c *CodeMode) RegisterMCPServer(ctx context.Context, p Principal, in codemode.Registration) (codemode.Server, error) {
	if err := c.Check(); err != nil {
		return codemode.Server{}, err
	}
	reg := c.reg
	return reg.Register(ctx, p.TenantID, in)
}

// MCPServerDetail is a server with the tools code may call.
type MCPServerDetail struct {
	codemode.Server
	ToolList []codemode.ToolInfo `json:"tool_list"`
}

// MCPServer returns the tenant's server and its allowed tools at detail
// (codemode.ValidDetail; a bad one names the field detail).
func (c *CodeMode) MCPServer(ctx context.Context, p Principal, name, detail string) (MCPServerDetail, error) {
	if err := c.Check(); err != nil {
		return MCPServerDetail{}, err
	}
	reg := c.reg
	srv, err := reg.Get(ctx, p.TenantID, name)
	if err != nil {
		return MCPServerDetail{}, mcpServerNotFound(err, name)
	}
	if !codemode.ValidDetail(detail) {
		return MCPServerDetail{}, BadRequest("detail", "must be name, description or full")
	}
	tools, err := reg.Tools(ctx, p.TenantID, name, detail)
	if err != nil {
		return MCPServerDetail{}, err
	}
	return MCPServerDetail{Server: srv, ToolList: tools}, nil
}

// UpdateMCPServer changes the tenant's server.
func (c *CodeMode) UpdateMCPServer(ctx context.Context, p Principal, name string, upd codemode.Update) (codemode.Server, error) {
	if err := c.Check(); err != nil {
		return codemode.Server{}, err
	}
	reg := c.reg
	srv, err := reg.Update(ctx, p.TenantID, name, upd)
	return srv, mcpServerNotFound(err, name)
}

// DeleteMCPServer removes the tenant's server with its credentials and
// tools.
func (c *CodeMode) DeleteMCPServer(ctx context.Context, p Principal, name string) error {
	if err := c.Check(); err != nil {
		return err
	}
	reg := c.reg
	return mcpServerNotFound(reg.Delete(ctx, p.TenantID, name), name)
}

// RefreshMCPServer fetches the server's tool list again, now.
func (c *CodeMode) RefreshMCPServer(ctx context.Context, p Principal, name string) (codemode.Server, error) {
	if err := c.Check(); err != nil {
		return codemode.Server{}, err
	}
	reg := c.reg
	srv, err := reg.Refresh(ctx, p.TenantID, name)
	return srv, mcpServerNotFound(err, name)
}

// SearchTools searches the tools code may call of the tenant's servers
// (every one, by server and name, when q is empty), at most limit.
func (c *CodeMode) SearchTools(ctx context.Context, p Principal, q, detail string, limit int) ([]codemode.ToolInfo, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	reg := c.reg
	return reg.Search(ctx, p.TenantID, q, detail, limit)
}
