-- +goose Up
-- A tenant's cap on its stateful sessions (each keeps a live sandbox, with
-- its memory, on a runner); NULL means the operator's default
-- (GANTRY_TENANT_MAX_LIVE_SESSIONS).
ALTER TABLE tenants ADD COLUMN max_live_sessions integer CHECK (max_live_sessions > 0);

-- +goose Down
ALTER TABLE tenants DROP COLUMN max_live_sessions;
