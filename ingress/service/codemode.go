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

// CheckCodeMode says whether code mode is configured: nil, or the error
// every code-mode operation answers.
func (s *Service) CheckCodeMode() error {
	if s.cfg.CodeMode == nil {
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
func (s *Service) MCPServers(ctx context.Context, p Principal) ([]codemode.Server, error) {
	if err := s.CheckCodeMode(); err != nil {
		return nil, err
	}
	reg := s.cfg.CodeMode
	return reg.List(ctx, p.TenantID)
}

// RegisterMCPServer registers an upstream server for the tenant, listing
// its tools first (a failure leaves nothing behind).
func (s *Service) RegisterMCPServer(ctx context.Context, p Principal, in codemode.Registration) (codemode.Server, error) {
	if err := s.CheckCodeMode(); err != nil {
		return codemode.Server{}, err
	}
	reg := s.cfg.CodeMode
	return reg.Register(ctx, p.TenantID, in)
}

// MCPServerDetail is a server with the tools code may call.
type MCPServerDetail struct {
	codemode.Server
	ToolList []codemode.ToolInfo `json:"tool_list"`
}

// MCPServer returns the tenant's server and its allowed tools at detail
// (codemode.ValidDetail; a bad one names the field detail).
func (s *Service) MCPServer(ctx context.Context, p Principal, name, detail string) (MCPServerDetail, error) {
	if err := s.CheckCodeMode(); err != nil {
		return MCPServerDetail{}, err
	}
	reg := s.cfg.CodeMode
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
func (s *Service) UpdateMCPServer(ctx context.Context, p Principal, name string, upd codemode.Update) (codemode.Server, error) {
	if err := s.CheckCodeMode(); err != nil {
		return codemode.Server{}, err
	}
	reg := s.cfg.CodeMode
	srv, err := reg.Update(ctx, p.TenantID, name, upd)
	return srv, mcpServerNotFound(err, name)
}

// DeleteMCPServer removes the tenant's server with its credentials and
// tools.
func (s *Service) DeleteMCPServer(ctx context.Context, p Principal, name string) error {
	if err := s.CheckCodeMode(); err != nil {
		return err
	}
	reg := s.cfg.CodeMode
	return mcpServerNotFound(reg.Delete(ctx, p.TenantID, name), name)
}

// RefreshMCPServer fetches the server's tool list again, now.
func (s *Service) RefreshMCPServer(ctx context.Context, p Principal, name string) (codemode.Server, error) {
	if err := s.CheckCodeMode(); err != nil {
		return codemode.Server{}, err
	}
	reg := s.cfg.CodeMode
	srv, err := reg.Refresh(ctx, p.TenantID, name)
	return srv, mcpServerNotFound(err, name)
}

// SearchTools searches the tools code may call of the tenant's servers
// (every one, by server and name, when q is empty), at most limit.
func (s *Service) SearchTools(ctx context.Context, p Principal, q, detail string, limit int) ([]codemode.ToolInfo, error) {
	if err := s.CheckCodeMode(); err != nil {
		return nil, err
	}
	reg := s.cfg.CodeMode
	return reg.Search(ctx, p.TenantID, q, detail, limit)
}
