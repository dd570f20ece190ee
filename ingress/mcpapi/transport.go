package mcpapi

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/service"
)

// mcpSessions binds each MCP transport session (Mcp-Session-Id) to the
// tenant that opened it, for as long as the MCP library keeps it: a
// request that carries another tenant's session id is answered as if the
// session did not exist, so nobody else's key can read its stream (where
// progress notifications carry a job's output) or end it.
type mcpSessions struct {
	mu    sync.Mutex
	owner map[string]string // session id -> tenant id
}

func newMCPSessions() *mcpSessions { return &mcpSessions{owner: map[string]string{}} }

// bind records that tenant opened session id, unless it is bound already.
func (m *mcpSessions) bind(id, tenantID string) {
	if id == "" || tenantID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.owner[id]; !ok {
		m.owner[id] = tenantID
	}
}

// allows reports whether tenant may use session id: its own, or one not
// bound (the MCP library answers unknown sessions itself).
func (m *mcpSessions) allows(id, tenantID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner, ok := m.owner[id]
	return !ok || owner == tenantID
}

func (m *mcpSessions) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.owner, id)
}

// hook binds sessions as the MCP library registers them and forgets them
// as it drops them (idle, deleted).
func (m *mcpSessions) hook(h *server.Hooks) {
	h.AddOnRegisterSession(func(ctx context.Context, session server.ClientSession) {
		if p, ok := service.PrincipalFrom(ctx); ok {
			m.bind(session.SessionID(), p.TenantID)
		}
	})
	h.AddOnUnregisterSession(func(_ context.Context, session server.ClientSession) {
		m.forget(session.SessionID())
	})
}
