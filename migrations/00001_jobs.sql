-- +goose Up
CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Only a SHA-256 of each key is stored: keys are 256-bit random tokens, so a
-- fast hash is enough and a lookup is one index probe.
CREATE TABLE api_keys (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL DEFAULT '',
    prefix     text NOT NULL,
    hash       bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE jobs (
    id               text PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    status           text NOT NULL CHECK (status IN
                     ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'error')),
    language         text NOT NULL,
    session_id       text,
    spec             jsonb NOT NULL,
    metadata         jsonb NOT NULL DEFAULT '{}',
    idempotency_key  text,
    request_hash     bytea,
    attempt          integer NOT NULL DEFAULT 0,
    runner_id        text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    exit_code        integer,
    duration_ms      bigint,
    stdout           bytea NOT NULL DEFAULT '',
    stderr           bytea NOT NULL DEFAULT '',
    stdout_truncated boolean NOT NULL DEFAULT false,
    stderr_truncated boolean NOT NULL DEFAULT false,
    artifacts        jsonb NOT NULL DEFAULT '[]',
    error_code       text,
    error_message    text
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_history ON jobs (tenant_id, id DESC);
CREATE INDEX jobs_history_status ON jobs (tenant_id, status, id DESC);
CREATE INDEX jobs_history_session ON jobs (tenant_id, session_id, id DESC) WHERE session_id IS NOT NULL;

-- +goose Down
DROP TABLE jobs;
DROP TABLE api_keys;
DROP TABLE tenants;
