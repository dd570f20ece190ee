package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/codemode"
)

// The tenants' upstream MCP servers (code mode) and their cached tool
// lists: the Store that codemode declares. Its errors are codemode's
// sentinels (mcpErr), which codemode branches on.

// mcpErr gives an error of the code-mode methods the meaning codemode.Store
// promises: codemode.ErrNotFound for a missing row, and the cause marked
// codemode.ErrUnavailable when Postgres cannot serve now (Unavailable still
// reports it, so the API answers 503 as for any outage).
func mcpErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return codemode.ErrNotFound
	case Unavailable(err):
		return fmt.Errorf("%w: %w", codemode.ErrUnavailable, err)
	}
	return err
}

// mcpServerColumns are qualified with the alias s, so that they also serve
// an UPDATE ... FROM's RETURNING.
const mcpServerColumns = `s.tenant_id, s.name, s.description, s.transport, s.display_url, s.command, s.secret_sealed, s.secret_names,
	s.allow_tools, s.deny_tools, s.timeout_ms, s.version, s.tools_refreshed_at, coalesce(s.tools_error, ''), s.created_at, s.updated_at,
	(SELECT count(*) FROM mcp_tools t WHERE t.tenant_id = s.tenant_id AND t.server = s.name AND t.allowed)`

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getMCPServer(ctx context.Context, q querier, tenantID, name string) (codemode.ServerRecord, error) {
	return scanMCPServer(q.QueryRow(ctx, `SELECT `+mcpServerColumns+` FROM mcp_servers s WHERE tenant_id = $1 AND name = $2`, tenantID, name))
}

func scanMCPServer(row pgx.Row) (codemode.ServerRecord, error) {
	var m codemode.ServerRecord
	err := row.Scan(&m.TenantID, &m.Name, &m.Description, &m.Transport, &m.DisplayURL, &m.Command, &m.SecretSealed,
		&m.SecretNames, &m.AllowTools, &m.DenyTools, &m.TimeoutMS, &m.Version, &m.ToolsRefreshedAt, &m.ToolsError,
		&m.CreatedAt, &m.UpdatedAt, &m.ToolCount)
	if err != nil {
		return m, err
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	utc(m.ToolsRefreshedAt)
	return m, nil
}

// CreateMCPServer registers a server with its first tool list, or returns
// codemode.ErrConflict when the tenant has one of that name.
func (s *Store) CreateMCPServer(ctx context.Context, m codemode.ServerRecord, tools []codemode.Tool) (_ codemode.ServerRecord, err error) {
	defer func() { err = mcpErr(err) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	_, err = tx.Exec(ctx, `
		INSERT INTO mcp_servers (tenant_id, name, description, transport, display_url, command, secret_sealed,
			secret_names, allow_tools, deny_tools, timeout_ms, tools_refreshed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())`,
		m.TenantID, m.Name, m.Description, m.Transport, m.DisplayURL, nonNilStrings(m.Command), m.SecretSealed,
		nonNilStrings(m.SecretNames), nonNilStrings(m.AllowTools), nonNilStrings(m.DenyTools), m.TimeoutMS)
	if isUniqueViolation(err) {
		return codemode.ServerRecord{}, fmt.Errorf("%w: an MCP server named %q is already registered", codemode.ErrConflict, m.Name)
	}
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	if err := replaceTools(ctx, tx, m.TenantID, m.Name, tools); err != nil {
		return codemode.ServerRecord{}, err
	}
	out, err := getMCPServer(ctx, tx, m.TenantID, m.Name)
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	return out, tx.Commit(ctx)
}

// UpdateMCPServer replaces a server's settings when its version is still
// m.Version (else codemode.ErrConflict), bumping the version. tools, when
// not nil, replaces the cached tool list; otherwise the cached tools'
// allowed flags are recomputed by allowed.
func (s *Store) UpdateMCPServer(ctx context.Context, m codemode.ServerRecord, tools []codemode.Tool, allowed func(tool string) bool) (_ codemode.ServerRecord, err error) {
	defer func() { err = mcpErr(err) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	tag, err := tx.Exec(ctx, `
		UPDATE mcp_servers SET description = $4, display_url = $5, command = $6, secret_sealed = $7, secret_names = $8,
			allow_tools = $9, deny_tools = $10, timeout_ms = $11, version = version + 1, updated_at = now(),
			tools_refreshed_at = CASE WHEN $12 THEN now() ELSE tools_refreshed_at END,
			tools_error = CASE WHEN $12 THEN NULL ELSE tools_error END
		WHERE tenant_id = $1 AND name = $2 AND version = $3`,
		m.TenantID, m.Name, m.Version, m.Description, m.DisplayURL, nonNilStrings(m.Command), m.SecretSealed,
		nonNilStrings(m.SecretNames), nonNilStrings(m.AllowTools), nonNilStrings(m.DenyTools), m.TimeoutMS, tools != nil)
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	if tag.RowsAffected() == 0 {
		if _, err := getMCPServer(ctx, tx, m.TenantID, m.Name); err != nil {
			return codemode.ServerRecord{}, err
		}
		return codemode.ServerRecord{}, fmt.Errorf("%w: MCP server %q was changed concurrently; retry", codemode.ErrConflict, m.Name)
	}
	if tools != nil {
		if err := replaceTools(ctx, tx, m.TenantID, m.Name, tools); err != nil {
			return codemode.ServerRecord{}, err
		}
	} else if err := reflag(ctx, tx, m.TenantID, m.Name, allowed); err != nil {
		return codemode.ServerRecord{}, err
	}
	out, err := getMCPServer(ctx, tx, m.TenantID, m.Name)
	if err != nil {
		return codemode.ServerRecord{}, err
	}
	return out, tx.Commit(ctx)
}

func reflag(ctx context.Context, tx pgx.Tx, tenantID, server string, allowed func(string) bool) error {
	rows, err := tx.Query(ctx, `SELECT name FROM mcp_tools WHERE tenant_id = $1 AND server = $2`, tenantID, server)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var yes []string
	for _, n := range names {
		if allowed(n) {
			yes = append(yes, n)
		}
	}
	_, err = tx.Exec(ctx, `UPDATE mcp_tools SET allowed = (name = ANY($3)) WHERE tenant_id = $1 AND server = $2`,
		tenantID, server, nonNilStrings(yes))
	return err
}

func replaceTools(ctx context.Context, tx pgx.Tx, tenantID, server string, tools []codemode.Tool) error {
	if _, err := tx.Exec(ctx, `DELETE FROM mcp_tools WHERE tenant_id = $1 AND server = $2`, tenantID, server); err != nil {
		return err
	}
	rows := make([][]any, 0, len(tools))
	for _, t := range tools {
		var out any
		if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
			out = t.OutputSchema
		}
		in := t.InputSchema
		if len(in) == 0 {
			in = json.RawMessage(`{}`)
		}
		rows = append(rows, []any{tenantID, server, t.Name, t.Description, in, out, t.Allowed})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"mcp_tools"},
		[]string{"tenant_id", "server", "name", "description", "input_schema", "output_schema", "allowed"},
		pgx.CopyFromRows(rows))
	return err
}

// SetMCPTools records a refreshed tool list (or, with errMsg set, why the
// refresh failed, keeping the old list) if the server is still at version.
func (s *Store) SetMCPTools(ctx context.Context, tenantID, server string, version int, tools []codemode.Tool, errMsg string) (err error) {
	defer func() { err = mcpErr(err) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	tag, err := tx.Exec(ctx, `
		UPDATE mcp_servers SET tools_refreshed_at = now(), refresh_claimed_at = NULL, tools_error = nullif($4, '')
		WHERE tenant_id = $1 AND name = $2 AND version = $3`, tenantID, server, version, errMsg)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	if errMsg == "" {
		if err := replaceTools(ctx, tx, tenantID, server, tools); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// GetMCPServer returns one of the tenant's servers or codemode.ErrNotFound.
func (s *Store) GetMCPServer(ctx context.Context, tenantID, name string) (_ codemode.ServerRecord, err error) {
	defer func() { err = mcpErr(err) }()
	return getMCPServer(ctx, s.pool, tenantID, name)
}

// ListMCPServers returns the tenant's servers by name.
func (s *Store) ListMCPServers(ctx context.Context, tenantID string) (_ []codemode.ServerRecord, err error) {
	defer func() { err = mcpErr(err) }()
	rows, err := s.pool.Query(ctx, `SELECT `+mcpServerColumns+` FROM mcp_servers s WHERE tenant_id = $1 ORDER BY name`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanMCPServerRow)
}

func scanMCPServerRow(r pgx.CollectableRow) (codemode.ServerRecord, error) { return scanMCPServer(r) }

// DeleteMCPServer removes a server and its tools, or returns
// codemode.ErrNotFound.
func (s *Store) DeleteMCPServer(ctx context.Context, tenantID, name string) (err error) {
	defer func() { err = mcpErr(err) }()
	tag, err := s.pool.Exec(ctx, `DELETE FROM mcp_servers WHERE tenant_id = $1 AND name = $2`, tenantID, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return codemode.ErrNotFound
	}
	return nil
}

// ClaimStaleMCPServers returns up to limit servers (of any tenant) whose
// tool list is older than age, marking them claimed for a minute so that
// concurrent ingress replicas refresh each one once.
func (s *Store) ClaimStaleMCPServers(ctx context.Context, age time.Duration, limit int) (_ []codemode.ServerRecord, err error) {
	defer func() { err = mcpErr(err) }()
	rows, err := s.pool.Query(ctx, `
		WITH c AS (
			SELECT tenant_id, name FROM mcp_servers
			WHERE (tools_refreshed_at IS NULL OR tools_refreshed_at < now() - make_interval(secs => $1))
			  AND (refresh_claimed_at IS NULL OR refresh_claimed_at < now() - interval '1 minute')
			ORDER BY tools_refreshed_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE mcp_servers s SET refresh_claimed_at = now() FROM c
		WHERE s.tenant_id = c.tenant_id AND s.name = c.name
		RETURNING `+mcpServerColumns, age.Seconds(), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanMCPServerRow)
}

const mcpToolColumns = `server, name, description, input_schema, output_schema, allowed`

func scanMCPTool(row pgx.Row, extra ...any) (codemode.Tool, error) {
	var t codemode.Tool
	var out []byte
	err := row.Scan(append([]any{&t.Server, &t.Name, &t.Description, &t.InputSchema, &out, &t.Allowed}, extra...)...)
	if out != nil {
		t.OutputSchema = out
	}
	return t, err
}

// MCPTools returns the allowed tools of the tenant's servers (server ""
// means all), by server and name.
func (s *Store) MCPTools(ctx context.Context, tenantID, server string) (_ []codemode.Tool, err error) {
	defer func() { err = mcpErr(err) }()
	rows, err := s.pool.Query(ctx, `SELECT `+mcpToolColumns+` FROM mcp_tools
		WHERE tenant_id = $1 AND ($2 = '' OR server = $2) AND allowed ORDER BY server, name`, tenantID, server)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (codemode.Tool, error) { return scanMCPTool(r) })
}

// GetMCPTool returns one cached tool (allowed or not) or codemode.ErrNotFound.
func (s *Store) GetMCPTool(ctx context.Context, tenantID, server, name string) (_ codemode.Tool, err error) {
	defer func() { err = mcpErr(err) }()
	t, err := scanMCPTool(s.pool.QueryRow(ctx, `SELECT `+mcpToolColumns+` FROM mcp_tools
		WHERE tenant_id = $1 AND server = $2 AND name = $3`, tenantID, server, name))
	return t, err
}

// SearchMCPTools ranks the tenant's allowed tools by relevance to q: any of
// its words may match; the tool's name weighs most, then its description
// and server. A query that names a tool exactly ("crm.get_customer" or
// "get_customer") ranks it first.
func (s *Store) SearchMCPTools(ctx context.Context, tenantID, q string, limit int) (_ []codemode.ToolHit, err error) {
	defer func() { err = mcpErr(err) }()
	rows, err := s.pool.Query(ctx, `
		WITH q AS (SELECT nullif(replace(plainto_tsquery('english', regexp_replace($2, '[_.-]+', ' ', 'g'))::text, '&', '|'), '')::tsquery AS q)
		SELECT `+mcpToolColumns+`,
			ts_rank_cd(t.search, q.q) + CASE WHEN lower($2) IN (lower(t.name), lower(t.server || '.' || t.name)) THEN 10 ELSE 0 END AS score
		FROM mcp_tools t, q
		WHERE t.tenant_id = $1 AND t.allowed AND q.q IS NOT NULL AND t.search @@ q.q
		ORDER BY score DESC, server, name LIMIT $3`, tenantID, q, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []codemode.ToolHit{}
	for rows.Next() {
		var h codemode.ToolHit
		t, err := scanMCPTool(rows, &h.Score)
		if err != nil {
			return nil, err
		}
		h.Tool = t
		out = append(out, h)
	}
	return out, rows.Err()
}

func nonNilStrings(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}
