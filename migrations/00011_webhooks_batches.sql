-- +goose Up
-- Batches: the jobs of one POST /v1/jobs/batch share a batch id.
ALTER TABLE jobs ADD COLUMN batch_id text;
CREATE INDEX jobs_history_batch ON jobs (tenant_id, batch_id, id DESC) WHERE batch_id IS NOT NULL;

-- Webhooks: the URL a job's request named (NULL: the tenant's default, if
-- any, is called), the tenant's default URL and its signing secrets, sealed
-- with GANTRY_SECRET_KEY. After a rotation the previous secret also signs
-- until webhook_secret_previous_until, so receivers can switch over.
ALTER TABLE jobs ADD COLUMN webhook_url text;
ALTER TABLE tenants
    ADD COLUMN webhook_url                    text,
    ADD COLUMN webhook_secret                 bytea,
    ADD COLUMN webhook_secret_previous        bytea,
    ADD COLUMN webhook_secret_previous_until  timestamptz;

-- The outbox: one delivery per finished job that has a webhook URL. Its id
-- is the Standard Webhooks message id (webhook-id), the same on every
-- attempt. Ingresses deliver what is due (FOR UPDATE SKIP LOCKED), taking a
-- lease by moving next_attempt_at on while they try.
CREATE TABLE webhook_deliveries (
    id              text PRIMARY KEY,
    job_id          text NOT NULL UNIQUE REFERENCES jobs (id) ON DELETE CASCADE,
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url             text NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        jsonb NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

-- A job's delivery is written by the statement that makes the job finished,
-- whichever it is (a runner's result, a session's, a cancel of a queued
-- job, gantry giving up): a finished job never changes again, so this runs
-- once per job, and the delivery commits or rolls back with the result.
-- +goose StatementBegin
CREATE FUNCTION jobs_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    target text;
BEGIN
    target := coalesce(NEW.webhook_url, (SELECT webhook_url FROM tenants WHERE id = NEW.tenant_id));
    IF target IS NOT NULL THEN
        INSERT INTO webhook_deliveries (id, job_id, tenant_id, url)
        VALUES ('msg_' || substr(NEW.id, 5), NEW.id, NEW.tenant_id, target)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER jobs_webhook_outbox AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (OLD.status IN ('queued', 'running') AND NEW.status NOT IN ('queued', 'running'))
    EXECUTE FUNCTION jobs_webhook_outbox();

-- +goose Down
DROP TRIGGER jobs_webhook_outbox ON jobs;
DROP FUNCTION jobs_webhook_outbox();
DROP TABLE webhook_deliveries;
ALTER TABLE tenants
    DROP COLUMN webhook_url,
    DROP COLUMN webhook_secret,
    DROP COLUMN webhook_secret_previous,
    DROP COLUMN webhook_secret_previous_until;
ALTER TABLE jobs DROP COLUMN webhook_url;
DROP INDEX jobs_history_batch;
ALTER TABLE jobs DROP COLUMN batch_id;
