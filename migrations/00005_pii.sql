-- +goose Up
-- Privacy tokens: with pii_tokens on, personal data in what a tenant's jobs
-- return to the model is replaced by tokens such as [EMAIL_3], turned back
-- into the values when the model passes them into a later job or tool call.
ALTER TABLE tenants ADD COLUMN pii_tokens boolean NOT NULL DEFAULT false;

-- One row per token. value_hash is a keyed hash (GANTRY_SECRET_KEY) of the
-- kind and normalised value, so the same value gets the same token without
-- storing it in the clear; value_sealed is the value as first seen, sealed.
-- The token text is [<kind>_<n>].
CREATE TABLE pii_tokens (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind         text NOT NULL,
    n            integer NOT NULL CHECK (n > 0),
    value_hash   bytea NOT NULL,
    value_sealed bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, kind, n),
    UNIQUE (tenant_id, value_hash)
);
CREATE INDEX pii_tokens_expires ON pii_tokens (expires_at);

-- The last number handed out per tenant and kind. Numbers are never reused,
-- not even after their tokens expire and are deleted, so a token the model
-- still holds can never come to mean another value.
CREATE TABLE pii_counters (
    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind      text NOT NULL,
    last_n    integer NOT NULL,
    PRIMARY KEY (tenant_id, kind)
);

-- +goose Down
DROP TABLE pii_counters;
DROP TABLE pii_tokens;
ALTER TABLE tenants DROP COLUMN pii_tokens;
