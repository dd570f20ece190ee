-- +goose Up
-- Every version of every skill. tenant_id NULL marks gantry's built-in
-- skills, visible to all tenants.
CREATE TABLE skills (
    id           bigserial PRIMARY KEY,
    tenant_id    text REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL,
    version      integer NOT NULL,
    description  text NOT NULL,
    tags         text[] NOT NULL DEFAULT '{}',
    language     text NOT NULL,
    requires     text[] NOT NULL DEFAULT '{}',
    body         text NOT NULL,
    files        jsonb NOT NULL DEFAULT '[]',
    content_hash bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Kept in sync by the store: tags as text, for the search vector.
    tags_text    text NOT NULL DEFAULT '',
    search       tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', replace(name, '_', ' ')), 'A') ||
        setweight(to_tsvector('english', description), 'A') ||
        setweight(to_tsvector('english', tags_text), 'B') ||
        setweight(to_tsvector('english', body), 'C')) STORED
);
CREATE UNIQUE INDEX skills_version ON skills (coalesce(tenant_id, ''), name, version);
CREATE INDEX skills_search ON skills USING gin (search);

-- A deleted skill's versions are removed; deleting is per tenant and name.

-- +goose Down
DROP TABLE skills;
