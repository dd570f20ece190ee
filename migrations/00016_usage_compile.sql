-- +goose Up
-- What a judge reports of a job (docs/ARCHITECTURE.md, "What a job used"):
--   cpu_time_ms     user and system CPU time of the program's sandbox;
--   peak_memory_kb  the largest resident set of any one of its processes;
--   compile         a compiled language's compile step: status, exit code,
--                   duration, its own CPU time and peak memory (jobs.Compile);
--   compile_output  what the compiler printed.
-- All are null (compile_output empty) for jobs recorded before them, and
-- for jobs whose program did not run or was not measured.
ALTER TABLE jobs ADD COLUMN cpu_time_ms bigint,
                 ADD COLUMN peak_memory_kb bigint,
                 ADD COLUMN compile jsonb,
                 ADD COLUMN compile_output bytea NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN compile_output, DROP COLUMN compile,
                 DROP COLUMN peak_memory_kb, DROP COLUMN cpu_time_ms;
