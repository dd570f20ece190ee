-- +goose Up
-- A tenant's quotas, set by the operator (gantry tenants set-limits); NULL
-- means the operator's default (GANTRY_TENANT_*).
ALTER TABLE tenants ADD COLUMN requests_per_second double precision CHECK (requests_per_second > 0),
                    ADD COLUMN max_queued integer CHECK (max_queued > 0),
                    ADD COLUMN max_running integer CHECK (max_running > 0);

-- +goose Down
ALTER TABLE tenants DROP COLUMN max_running, DROP COLUMN max_queued, DROP COLUMN requests_per_second;
