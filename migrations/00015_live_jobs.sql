-- +goose Up
-- The jobs not finished yet, for the gauges an operator alerts on (how
-- many are queued or running, and for how long the oldest has been):
-- small, since finished jobs leave it.
CREATE INDEX jobs_live ON jobs (status, created_at) WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX jobs_live;
