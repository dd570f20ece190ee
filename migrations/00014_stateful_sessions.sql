-- +goose Up
-- Stateful sessions keep a live sandbox (an interpreter, /tmp, processes)
-- between their jobs. live_id names the sandbox the session's live state
-- is in ("<container id>/<sandbox number>", NULL: none); live_lost says why
-- the last one was lost, when its runner knew. A job of such a session
-- records what it found (live_state: new, kept or lost, with the reason)
-- and the value of its last expression as a notebook shows it.
ALTER TABLE sessions
    ADD COLUMN stateful  boolean NOT NULL DEFAULT false,
    ADD COLUMN live_id   text,
    ADD COLUMN live_lost text;
ALTER TABLE jobs
    ADD COLUMN value             jsonb,
    ADD COLUMN live_state        text,
    ADD COLUMN live_state_reason text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN live_state_reason, DROP COLUMN live_state, DROP COLUMN value;
ALTER TABLE sessions DROP COLUMN live_lost, DROP COLUMN live_id, DROP COLUMN stateful;
