-- +goose NO TRANSACTION
-- +goose Up
-- History users can search (GET /v1/jobs): by language, by a time range of
-- created_at and by metadata, each beside the tenant's newest-first order.
-- Built without blocking writes on a table that may be large; hence no
-- transaction around this migration.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_history_language ON jobs (tenant_id, language, id DESC);
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_history_created ON jobs (tenant_id, created_at);
-- metadata @> '{"k": "v", ...}': every pair must match.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_metadata ON jobs USING gin (metadata jsonb_path_ops);

-- Jobs whose env values are stored in the clear (written before env was
-- sealed, or by a gantry without GANTRY_SECRET_KEY): an ingress with the
-- key seals them a batch at a time, and finds them here without a scan.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_env_plain ON jobs (id) WHERE spec ? 'env';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_env_plain;
DROP INDEX CONCURRENTLY IF EXISTS jobs_metadata;
DROP INDEX CONCURRENTLY IF EXISTS jobs_history_created;
DROP INDEX CONCURRENTLY IF EXISTS jobs_history_language;
