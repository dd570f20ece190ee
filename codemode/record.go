package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Store keeps the tenants' registered servers and their cached tool lists;
// *store.Store is one. Every method is scoped by tenant except
// ClaimStaleMCPServers, which serves the refresh of every tenant's lists.
// Errors a caller branches on are wrapped sentinels of this package:
// ErrNotFound, ErrConflict, and ErrUnavailable while the database cannot
// serve.
type Store interface {
	// CreateMCPServer stores a new server with its first tool list;
	// ErrConflict if the tenant has one of that name.
	CreateMCPServer(ctx context.Context, m ServerRecord, tools []Tool) (ServerRecord, error)
	// UpdateMCPServer replaces a server's settings if it is still at
	// m.Version (else ErrConflict; ErrNotFound if it is gone), bumping the
	// version. tools, when not nil, replaces the cached list; otherwise
	// the cached tools' Allowed flags are recomputed with allowed.
	UpdateMCPServer(ctx context.Context, m ServerRecord, tools []Tool, allowed func(string) bool) (ServerRecord, error)
	// SetMCPTools records a refreshed tool list, or with errMsg set why
	// the refresh failed (keeping the old list), if the server is still
	// at version; otherwise it does nothing.
	SetMCPTools(ctx context.Context, tenantID, server string, version int, tools []Tool, errMsg string) error
	// GetMCPServer returns one server, or ErrNotFound.
	GetMCPServer(ctx context.Context, tenantID, name string) (ServerRecord, error)
	// ListMCPServers returns the tenant's servers by name.
	ListMCPServers(ctx context.Context, tenantID string) ([]ServerRecord, error)
	// DeleteMCPServer removes a server and its tools, or returns
	// ErrNotFound.
	DeleteMCPServer(ctx context.Context, tenantID, name string) error
	// ClaimStaleMCPServers returns up to limit servers of any tenant
	// whose tool list is older than age, claimed for a while so that
	// concurrent callers (ingress replicas) get different ones.
	ClaimStaleMCPServers(ctx context.Context, age time.Duration, limit int) ([]ServerRecord, error)
	// MCPTools returns the allowed tools of the tenant's servers (server
	// "" means all), by server and name.
	MCPTools(ctx context.Context, tenantID, server string) ([]Tool, error)
	// GetMCPTool returns one cached tool, allowed or not, or ErrNotFound.
	GetMCPTool(ctx context.Context, tenantID, server, name string) (Tool, error)
	// SearchMCPTools ranks the tenant's allowed tools by relevance to q,
	// best first, at most limit.
	SearchMCPTools(ctx context.Context, tenantID, q string, limit int) ([]ToolHit, error)
}

// Errors a Store returns, wrapped, for code mode to branch on.
var (
	// ErrNotFound means the tenant has no such server or tool.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a server of that name is registered already, or
	// the server changed since it was read.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable means the database cannot serve now (unreachable,
	// restarting): a retry may succeed.
	ErrUnavailable = errors.New("database unavailable")
)

// ServerRecord is an upstream MCP server a tenant registered, as stored.
// SecretSealed holds what may carry a credential (URL, headers, the
// environment of a stdio server), sealed; only its names are shown.
type ServerRecord struct {
	TenantID         string
	Name             string
	Description      string
	Transport        string // "http" or "stdio"
	DisplayURL       string
	Command          []string
	SecretSealed     []byte
	SecretNames      []string
	AllowTools       []string
	DenyTools        []string
	TimeoutMS        int
	Version          int // bumped on every change, so cached connections are replaced
	ToolsRefreshedAt *time.Time
	ToolsError       string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	ToolCount        int // allowed tools in the cached list
}

// Tool is one tool in a server's cached tool list.
type Tool struct {
	Server       string          `json:"server"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Allowed      bool            `json:"-"`
}

// ToolHit is a tool found by a search, with its rank.
type ToolHit struct {
	Tool
	Score float64
}
