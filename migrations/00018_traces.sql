-- +goose Up
-- The W3C traceparent of the span that queued the job (NULL with tracing
-- off): runners make their spans for the job its children, whichever
-- message brought them the job, and the job shows its trace id.
ALTER TABLE jobs ADD COLUMN trace_parent text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN trace_parent;
