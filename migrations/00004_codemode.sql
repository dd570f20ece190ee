-- +goose Up
-- Upstream MCP servers a tenant registered for code mode. What may carry a
-- credential (the URL, headers, a stdio server's environment) is sealed
-- with GANTRY_SECRET_KEY in secret_sealed and never stored in the clear;
-- display_url is the URL without userinfo, query or fragment.
CREATE TABLE mcp_servers (
    tenant_id          text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name               text NOT NULL,
    description        text NOT NULL DEFAULT '',
    transport          text NOT NULL CHECK (transport IN ('http', 'stdio')),
    display_url        text NOT NULL DEFAULT '',
    command            text[] NOT NULL DEFAULT '{}',
    secret_sealed      bytea NOT NULL,
    secret_names       text[] NOT NULL DEFAULT '{}',
    allow_tools        text[] NOT NULL DEFAULT '{}',
    deny_tools         text[] NOT NULL DEFAULT '{}',
    timeout_ms         integer NOT NULL,
    version            integer NOT NULL DEFAULT 1,
    tools_refreshed_at timestamptz,
    tools_error        text,
    refresh_claimed_at timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- The cached tool list of each server, searchable. allowed is the server's
-- allow/deny lists applied when the row was written: denied tools are
-- never offered; the runner still checks the lists on every call.
CREATE TABLE mcp_tools (
    tenant_id     text NOT NULL,
    server        text NOT NULL,
    name          text NOT NULL,
    description   text NOT NULL DEFAULT '',
    input_schema  jsonb NOT NULL DEFAULT '{}',
    output_schema jsonb,
    allowed       boolean NOT NULL DEFAULT true,
    search        tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', server), 'B') ||
        setweight(to_tsvector('english', regexp_replace(name, '[_.-]+', ' ', 'g')), 'A') ||
        setweight(to_tsvector('english', description), 'B')) STORED,
    PRIMARY KEY (tenant_id, server, name),
    FOREIGN KEY (tenant_id, server) REFERENCES mcp_servers (tenant_id, name) ON DELETE CASCADE
);
CREATE INDEX mcp_tools_search ON mcp_tools USING gin (search);

-- Every upstream call a job's code made through the bridge.
ALTER TABLE jobs ADD COLUMN tool_calls jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE jobs DROP COLUMN tool_calls;
DROP TABLE mcp_tools;
DROP TABLE mcp_servers;
