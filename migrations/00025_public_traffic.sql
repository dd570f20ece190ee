-- +goose Up
-- Whether a stateful session's ports are reachable by anyone who has
-- their URL (true, the default), or only with the session's traffic token
-- or an API key of its tenant (E2B's allowPublicTraffic: false).
ALTER TABLE sessions ADD COLUMN public_traffic boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE sessions DROP COLUMN public_traffic;
