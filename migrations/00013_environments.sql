-- +goose Up
-- Environments: named sandbox images an operator registers (gantry
-- environments add), for all tenants (tenants NULL) or those named.
CREATE TABLE environments (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9-]{0,39}$' AND name <> 'default'),
    image       text NOT NULL CHECK (image <> ''),
    description text NOT NULL DEFAULT '',
    tenants     text[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A session's jobs run in its environment ('' for the runner's own image).
ALTER TABLE sessions ADD COLUMN environment text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN environment;
DROP TABLE environments;
