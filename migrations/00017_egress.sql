-- +goose Up
-- Egress: the hosts a tenant's jobs may reach through the runner's egress
-- proxy (empty: none, no network at all), and what each job connected to.
ALTER TABLE tenants ADD COLUMN egress_allow text[] NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN egress jsonb;

-- +goose Down
ALTER TABLE jobs DROP COLUMN egress;
ALTER TABLE tenants DROP COLUMN egress_allow;
