-- +goose Up
-- A session's access tokens (E2B's envdAccessToken) open it until
-- token_until: set when a caller with an API key asks for a token (to the
-- session's expiry then) or sets the session's timeout, and never moved by
-- the session's jobs, so a token cannot keep itself alive by running code.
-- NULL: no token was ever handed out for the session.
ALTER TABLE sessions ADD COLUMN token_until timestamptz;

-- +goose Down
ALTER TABLE sessions DROP COLUMN token_until;
