-- +goose Up
-- Live state that outlives its container (docs/ARCHITECTURE.md, "Live
-- state"): a checkpoint is a stateful session's whole live state (its
-- sandbox's memory, processes, /tmp and workspace) as gVisor saved it, one
-- object in the object store. Sessions and snapshots name the checkpoint to
-- restore; one nothing names any more is deleted by the sweeper.
CREATE TABLE checkpoints (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    key        text NOT NULL,
    bytes      bigint NOT NULL,
    -- what it restores on: the same image, runsc and platform
    image      text NOT NULL,
    runtime    text NOT NULL,
    -- the workspace version it holds
    version    bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX checkpoints_age ON checkpoints (created_at);

-- paused: the session holds no live sandbox, and its live state is its
-- checkpoint; on_timeout: what its expiry does (kill closes it, pause
-- pauses it); checkpoint_id: the live state to restore where there is no
-- live sandbox (paused, forked, made from a snapshot, or its runner lost
-- since that checkpoint was taken).
ALTER TABLE sessions
    ADD COLUMN paused        boolean NOT NULL DEFAULT false,
    ADD COLUMN on_timeout    text NOT NULL DEFAULT 'kill' CHECK (on_timeout IN ('kill', 'pause')),
    ADD COLUMN checkpoint_id text REFERENCES checkpoints(id);

-- A tenant's snapshots of stateful sessions: a checkpoint and the
-- workspace it holds, kept until deleted, counted in the tenant's storage.
CREATE TABLE snapshots (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name          text,
    session_id    text,
    checkpoint_id text NOT NULL REFERENCES checkpoints(id),
    workspace_key text,
    language      text NOT NULL,
    environment   text NOT NULL DEFAULT '',
    disk_mb       integer NOT NULL,
    bytes         bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshots_tenant ON snapshots (tenant_id, id DESC);

-- A tenant's cap on what its snapshots hold (NULL: the operator's default,
-- GANTRY_TENANT_MAX_SNAPSHOT_MB).
ALTER TABLE tenants ADD COLUMN max_snapshot_mb integer CHECK (max_snapshot_mb > 0);

-- +goose Down
ALTER TABLE tenants DROP COLUMN max_snapshot_mb;
DROP TABLE snapshots;
ALTER TABLE sessions DROP COLUMN checkpoint_id, DROP COLUMN on_timeout, DROP COLUMN paused;
DROP TABLE checkpoints;
