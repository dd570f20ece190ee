-- +goose Up
-- A session is a stateful workspace: its jobs run one at a time, in
-- submission order, and each sees the files the previous one left. The
-- workspace lives in the object store as versioned snapshots; the row holds
-- the current version and who may run the session's jobs now (owner).
CREATE TABLE sessions (
    id             text PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    status         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'closing')),
    language       text NOT NULL,
    ttl_seconds    integer NOT NULL,
    disk_mb        integer NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    version        bigint NOT NULL DEFAULT 0,
    snapshot_key   text,
    snapshot_bytes bigint NOT NULL DEFAULT 0,
    last_job_id    text,
    -- seq numbers the session's jobs in submission order; queued counts
    -- those not yet started. An owner may only let go when queued = 0.
    seq            bigint NOT NULL DEFAULT 0,
    queued         integer NOT NULL DEFAULT 0,
    owner          text,
    owner_until    timestamptz,
    closing_since  timestamptz
);
CREATE INDEX sessions_tenant ON sessions (tenant_id, id DESC);
CREATE INDEX sessions_expiry ON sessions (expires_at) WHERE status = 'active';
CREATE INDEX sessions_closing ON sessions (closing_since) WHERE status = 'closing';

ALTER TABLE jobs ADD COLUMN session_seq bigint;
CREATE INDEX jobs_session_order ON jobs (session_id, session_seq) WHERE session_id IS NOT NULL;

-- +goose Down
DROP INDEX jobs_session_order;
ALTER TABLE jobs DROP COLUMN session_seq;
DROP TABLE sessions;
