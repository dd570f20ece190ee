-- +goose Up
-- A session may have env every one of its jobs gets (sealed, as jobs'
-- env values are).
ALTER TABLE sessions ADD COLUMN env bytea;
-- A stateful session's Python job (a notebook cell) records, besides the
-- value of its last expression, what it displayed (figures shown, with
-- GANTRY_FIGURES=display: a list of MIME bundles) and the exception that
-- ended it (name, value, traceback).
ALTER TABLE jobs
    ADD COLUMN displays  jsonb,
    ADD COLUMN exception jsonb;

-- +goose Down
ALTER TABLE jobs DROP COLUMN exception, DROP COLUMN displays;
ALTER TABLE sessions DROP COLUMN env;
