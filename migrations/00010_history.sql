-- +goose NO TRANSACTION
-- +goose Up
-- Output longer than GANTRY_OUTPUT_INLINE_BYTES is kept in the object store;
-- the row keeps its key (NULL: the bytes are in stdout/stderr).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS stdout_key text, ADD COLUMN IF NOT EXISTS stderr_key text;

-- The retention sweep (GANTRY_HISTORY_TTL) takes the oldest finished jobs
-- first. Built without blocking writes on a table that may be large; hence
-- no transaction around this migration.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_finished;
ALTER TABLE jobs DROP COLUMN IF EXISTS stdout_key, DROP COLUMN IF EXISTS stderr_key;
