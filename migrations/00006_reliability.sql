-- +goose Up
-- key_epoch counts the revocations of a tenant's API keys. Runners read it
-- with each job's claim and retire the tenant's warm containers when it
-- moved, so nothing started under a revoked key serves the tenant again.
ALTER TABLE tenants ADD COLUMN key_epoch bigint NOT NULL DEFAULT 0;

-- A session's queued jobs are counted from the jobs themselves (a count kept
-- by hand drifted when queued jobs were cancelled); this index makes the
-- count a probe of the few queued rows.
ALTER TABLE sessions DROP COLUMN queued;
CREATE INDEX jobs_session_queued ON jobs (session_id) WHERE status = 'queued' AND session_id IS NOT NULL;

-- +goose Down
DROP INDEX jobs_session_queued;
ALTER TABLE sessions ADD COLUMN queued integer NOT NULL DEFAULT 0;
UPDATE sessions SET queued = (SELECT count(*) FROM jobs WHERE jobs.session_id = sessions.id AND jobs.status = 'queued');
ALTER TABLE tenants DROP COLUMN key_epoch;
