-- +goose Up
-- Secrets: a tenant's values that egress rules set on requests at the
-- runner's proxy (never inside a sandbox), sealed under GANTRY_SECRET_KEY.
-- A secret with a session is that session's (an E2B sandbox's rule values,
-- named _e2b_...) and goes with it; the others are the tenant's own
-- (PUT /v1/secrets/NAME).
CREATE TABLE secrets (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    session_id text REFERENCES sessions (id) ON DELETE CASCADE,
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
CREATE INDEX secrets_session ON secrets (session_id) WHERE session_id IS NOT NULL;

-- A session's own network: egress narrowing and header rules (jobs.Network).
ALTER TABLE sessions ADD COLUMN network jsonb;

-- Each tenant's egress CA, made when first needed: its certificate, and its
-- key sealed under GANTRY_SECRET_KEY.
ALTER TABLE tenants ADD COLUMN egress_ca_cert text, ADD COLUMN egress_ca_key bytea;

-- +goose Down
ALTER TABLE tenants DROP COLUMN egress_ca_cert, DROP COLUMN egress_ca_key;
ALTER TABLE sessions DROP COLUMN network;
DROP TABLE secrets;
