-- +goose Up
-- Skills follow the Agent Skills standard: its optional front matter fields
-- get columns, and each version records the bytes it takes when mounted, so
-- a tenant's skills as a whole can be capped. Binary files stay in the files
-- column, as base64 with "encoding": "base64" (jsonb holds neither NUL bytes
-- nor invalid UTF-8).
ALTER TABLE skills
    ADD COLUMN license       text  NOT NULL DEFAULT '',
    ADD COLUMN compatibility text  NOT NULL DEFAULT '',
    ADD COLUMN metadata      jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN allowed_tools text  NOT NULL DEFAULT '',
    ADD COLUMN size_bytes    bigint NOT NULL DEFAULT 0;

UPDATE skills SET size_bytes = octet_length(body) + octet_length(description) + coalesce(
    (SELECT sum(octet_length(f ->> 'content')) FROM jsonb_array_elements(files) f), 0);

-- Standard names use hyphens (data-analysis): split names on them, as on
-- underscores, for search.
DROP INDEX skills_search;
ALTER TABLE skills DROP COLUMN search;
ALTER TABLE skills ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', translate(name, '_-', '  ')), 'A') ||
    setweight(to_tsvector('english', description), 'A') ||
    setweight(to_tsvector('english', tags_text), 'B') ||
    setweight(to_tsvector('english', body), 'C')) STORED;
CREATE INDEX skills_search ON skills USING gin (search);

-- +goose Down
DROP INDEX skills_search;
ALTER TABLE skills DROP COLUMN search;
ALTER TABLE skills ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', replace(name, '_', ' ')), 'A') ||
    setweight(to_tsvector('english', description), 'A') ||
    setweight(to_tsvector('english', tags_text), 'B') ||
    setweight(to_tsvector('english', body), 'C')) STORED;
CREATE INDEX skills_search ON skills USING gin (search);
ALTER TABLE skills
    DROP COLUMN license,
    DROP COLUMN compatibility,
    DROP COLUMN metadata,
    DROP COLUMN allowed_tools,
    DROP COLUMN size_bytes;
