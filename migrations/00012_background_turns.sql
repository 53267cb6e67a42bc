-- +goose Up
-- Background turns (docs/background.md): turns nobody waits on, queued when
-- every worker is busy and resumed by another process when theirs dies.

-- On Citus, DDL on a reference table (tenants) and on distributed ones in
-- one transaction must run over one connection per node.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd

-- A background turn is resumed, never interrupted, when its process dies
-- (docs/durability.md); attempts counts the workers that began it: 0 while
-- it waits in the queue, 1 once a worker runs it, one more at each
-- resumption. Every write of a turn is fenced on it, so a worker that was
-- taken over (it looked dead, but only its connection was) writes nothing
-- more. Turns before this migration ran once.
ALTER TABLE turns ADD COLUMN background boolean NOT NULL DEFAULT false;
ALTER TABLE turns ADD COLUMN attempts integer NOT NULL DEFAULT 1;

-- How many background turns a tenant may have waiting for a worker; NULL is
-- the server's default (--max-queued-turns). (The check is a statement of
-- its own: Citus adds no column with a constraint to a reference table.)
ALTER TABLE tenants ADD COLUMN max_queued_turns integer;
ALTER TABLE tenants ADD CONSTRAINT tenants_max_queued_turns_check CHECK (max_queued_turns > 0);

-- The durable queue: one row for each background turn that has not ended,
-- written in the transaction that claims the turn and deleted in the one
-- that ends it. A turn whose session claim has no live owner (never run, or
-- its process died) is waiting for a worker; workers take the oldest of each
-- tenant in turn (store/turnqueue.go). Distributed by tenant_id with the
-- turns, so a turn's claim and end commit in one phase on Citus.
CREATE TABLE turn_queue (
    tenant_id   uuid        NOT NULL,
    session_id  text        NOT NULL,
    turn_id     text        NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, turn_id),
    FOREIGN KEY (tenant_id, session_id, turn_id) REFERENCES turns (tenant_id, session_id, id) ON DELETE CASCADE
);
CREATE INDEX turn_queue_order ON turn_queue (tenant_id, enqueued_at, turn_id);
SELECT aapd_distribute('turn_queue', 'sessions');

-- +goose Down
DROP TABLE turn_queue;
ALTER TABLE tenants DROP COLUMN max_queued_turns;
ALTER TABLE turns DROP COLUMN attempts;
ALTER TABLE turns DROP COLUMN background;
