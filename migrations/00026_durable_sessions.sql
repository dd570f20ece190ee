-- +goose Up
-- A durable stateful session's live state outlives its sandbox: it runs
-- under gVisor where runners have it, and can be paused, snapshotted and
-- forked. Stateful sessions made before this were all made so.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS durable boolean NOT NULL DEFAULT false;
UPDATE sessions SET durable = stateful;

-- +goose Down
ALTER TABLE sessions DROP COLUMN durable;
