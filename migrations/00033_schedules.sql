-- +goose Up
-- Schedules (docs/background.md#schedules): a session's turns started by a
-- clock. Each tick is claimed by one replica's scheduler (scheduler/) with
-- FOR UPDATE SKIP LOCKED, and the transaction that advances next_run_at is
-- the one that queues the tick's background turn (turn_queue): a tick runs
-- exactly once, whichever replicas run or restart around it.

-- A schedule belongs to its session: deleted with it (and its tenant), and
-- exported with it. Distributed by tenant_id with the sessions, so a tick's
-- claim, its turn and its advance commit in one phase on Citus.
CREATE TABLE schedules (
    tenant_id       uuid        NOT NULL,
    session_id      text        NOT NULL,
    id              text        NOT NULL,
    -- when it ticks: a five-field cron expression in timezone (an IANA
    -- name), or every every_ms milliseconds from its creation
    cron            text,
    timezone        text,
    every_ms        bigint,
    -- the turn each tick starts: {"messages":[…],"stream":…}
    request         jsonb       NOT NULL,
    end_at          timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- the next tick; NULL once the schedule has ended (its endAt passed)
    next_run_at     timestamptz,
    last_run_at     timestamptz,
    last_turn_id    text,
    -- ticks that started a turn, and ticks skipped: the session still ran
    -- a turn, the tick was missed while no replica ran, or the turn was
    -- refused (last_error says why)
    runs            bigint      NOT NULL DEFAULT 0,
    skipped_running bigint      NOT NULL DEFAULT 0,
    skipped_missed  bigint      NOT NULL DEFAULT 0,
    skipped_refused bigint      NOT NULL DEFAULT 0,
    last_error      text,
    PRIMARY KEY (tenant_id, session_id, id),
    CHECK ((cron IS NULL) <> (every_ms IS NULL)),
    CHECK (every_ms IS NULL OR every_ms >= 1000)
);
-- The schedules due, across tenants (every replica's scheduler looks each
-- second).
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        -- As in 00009: DDL on distributed tables with foreign keys, inside
        -- goose's transaction, over one connection per node.
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd
SELECT aapd_distribute('schedules', 'sessions');
ALTER TABLE schedules ADD FOREIGN KEY (tenant_id, session_id)
    REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;
-- The tenant wall (00030): a tenant's transactions see its schedules only;
-- the schedulers' scan for due ticks, across tenants, runs as aapd_chores.
GRANT SELECT, INSERT, UPDATE, DELETE ON schedules TO aapd_app, aapd_chores;
SELECT aapd_tenant_wall('schedules');

-- +goose Down
DROP TABLE schedules;
