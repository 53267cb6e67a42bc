-- +goose Up
-- Webhooks (docs/background.md): a tenant's endpoints, and the outbox of
-- their deliveries. A delivery is written in the transaction that ends a
-- turn (or deletes a session), and carried out after the commit by the
-- deliverer of any replica (webhooks/), which claims due ones with
-- FOR UPDATE SKIP LOCKED.

-- An endpoint: where a tenant's events of the listed types are sent, signed
-- with its secret (sealed with the server's encryption key, like secret
-- options). After a rotation the previous secret keeps signing beside the
-- new one until previous_secret_until.
CREATE TABLE webhook_endpoints (
    tenant_id             uuid        NOT NULL,
    id                    text        NOT NULL,
    url                   text        NOT NULL,
    description           text        NOT NULL DEFAULT '',
    events                text[]      NOT NULL,
    secret                bytea       NOT NULL,
    previous_secret       bytea,
    previous_secret_until timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    -- the first failed attempt since the last success: five days of
    -- failures disable the endpoint
    failing_since         timestamptz,
    disabled_at           timestamptz,
    disabled_reason       text,
    PRIMARY KEY (tenant_id, id)
);

-- One event to one endpoint. The event (its id, type, time and data) is the
-- same on every attempt and every redelivery, so receivers can deduplicate
-- by its id; the body is made from it. data names the session and turn but
-- holds no message content. No session_id column: a delivery outlives its
-- session (session.deleted is about a session that is gone).
CREATE TABLE webhook_deliveries (
    tenant_id       uuid        NOT NULL,
    endpoint_id     text        NOT NULL,
    event_id        text        NOT NULL,
    event_type      text        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    data            jsonb       NOT NULL,
    -- pending (due at next_attempt_at; a claim moves that to the end of its
    -- lease), delivered, or failed
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    -- attempts of the current schedule (a redelivery starts a new one)
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    -- every attempt: [{"at","statusCode","latencyMs","error"}], the newest last
    attempt_log     jsonb       NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, endpoint_id, event_id),
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL))
);
-- Which tenants have deliveries due (every replica's scan), and a tenant's
-- due deliveries in order (its claim).
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_tenant_due ON webhook_deliveries (tenant_id, next_attempt_at) WHERE state = 'pending';
-- Ended deliveries, oldest first, for pruning.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE finished_at IS NOT NULL;

-- The foreign keys come after the tables are distributed: on Citus, a
-- table created with a key to a reference table (tenants) becomes a
-- "Citus local" table, which can no longer be distributed (see 00009).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        -- As in 00009: DDL on tables with foreign keys to reference tables,
        -- inside goose's transaction, over one connection per node.
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd
SELECT aapd_distribute('webhook_endpoints', 'sessions');
SELECT aapd_distribute('webhook_deliveries', 'sessions');
ALTER TABLE webhook_endpoints ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD FOREIGN KEY (tenant_id, endpoint_id)
    REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE;

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
