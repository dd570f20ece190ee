-- +goose Up
-- What tells a stranded job from a live one (see docs/ARCHITECTURE.md,
-- "When Postgres goes away"):
--   heartbeat_at  written by the runner running the job, at the claim and
--                 with every heartbeat: a running job whose heartbeat is
--                 old has no live runner;
--   msg_seq       the stream sequence of the job's one run message, set in
--                 the transaction that queues the job and by the
--                 reconciler when it publishes a new one: a runner given
--                 any other message for the job drops it, and the
--                 reconciler asks JetStream whether that message is still
--                 there;
--   checked_at    when the reconciler last looked at the job, so that each
--                 sweep looks at the jobs checked longest ago.
ALTER TABLE jobs ADD COLUMN heartbeat_at timestamptz,
                 ADD COLUMN msg_seq bigint,
                 ADD COLUMN checked_at timestamptz;
CREATE INDEX jobs_unfinished ON jobs ((coalesce(checked_at, created_at)))
    WHERE status IN ('queued', 'running') AND session_id IS NULL;

-- +goose Down
DROP INDEX jobs_unfinished;
ALTER TABLE jobs DROP COLUMN checked_at, DROP COLUMN msg_seq, DROP COLUMN heartbeat_at;
