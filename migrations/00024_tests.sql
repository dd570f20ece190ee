-- +goose Up
-- The results of a job's tests (jobs.TestResult, in order): null for a job
-- without tests. How many passed is counted from them.
ALTER TABLE jobs ADD COLUMN tests jsonb;

-- +goose Down
ALTER TABLE jobs DROP COLUMN tests;
