-- +goose Up
-- Exactly-once turns, and an event log that costs about what it repeats.
--
-- turns.step numbers the commits of a turn (0 at the claim, then one per
-- committed step, the last with the turn's end): a commit applies only if
-- the turn's step is below its own number, so a retried commit that had
-- already landed is a no-op by construction.
ALTER TABLE turns ADD COLUMN step integer NOT NULL DEFAULT 0;

-- turns.events is a finished turn's whole event log, in the folded form of
-- store/eventlog.go: consecutive deltas of one kind are one entry (their
-- text concatenated, with each delta's length), so a resume from any id is
-- served exactly while the log costs about the bytes of the messages.
ALTER TABLE turns ADD COLUMN events json;

-- A running turn's events, recorded in batches: one row for each flush,
-- covering ids first_seq..last_seq. A finished turn has no batches: its
-- end folds them into turns.events in the same transaction.
CREATE TABLE turn_event_batches (
    tenant_id  uuid    NOT NULL,
    session_id text    NOT NULL,
    turn_id    text    NOT NULL,
    first_seq  integer NOT NULL,
    last_seq   integer NOT NULL,
    events     json    NOT NULL,
    PRIMARY KEY (tenant_id, session_id, turn_id, first_seq),
    FOREIGN KEY (tenant_id, session_id, turn_id) REFERENCES turns (tenant_id, session_id, id) ON DELETE CASCADE
);

-- The old one-row-per-event log, folded: finished turns into turns.events,
-- the events of turns still running (a process died meanwhile) into one
-- batch each.
UPDATE turns t SET events = e.log
FROM (SELECT tenant_id, session_id, turn_id,
             json_agg(json_build_object('t', type, 'd', data) ORDER BY seq) AS log
      FROM turn_events GROUP BY tenant_id, session_id, turn_id) e
WHERE t.tenant_id = e.tenant_id AND t.session_id = e.session_id AND t.id = e.turn_id AND t.status <> 'running';

INSERT INTO turn_event_batches (tenant_id, session_id, turn_id, first_seq, last_seq, events)
SELECT e.tenant_id, e.session_id, e.turn_id, min(e.seq), max(e.seq),
       json_agg(json_build_object('t', e.type, 'd', e.data) ORDER BY e.seq)
FROM turn_events e JOIN turns t ON t.tenant_id = e.tenant_id AND t.session_id = e.session_id AND t.id = e.turn_id
WHERE t.status = 'running'
GROUP BY e.tenant_id, e.session_id, e.turn_id;

DROP TABLE turn_events;

-- A turn's messages are the newest of its session when it starts: the
-- first seq it wrote bounds the lookup of its messages (the body replayed
-- for a retried stream "none" request), so messages need no index by turn,
-- and a turn costs one index insertion less per message.
ALTER TABLE turns ADD COLUMN first_seq bigint;
DROP INDEX messages_turn;

-- Most turns have no idempotency key: index only those that do.
DROP INDEX turns_idempotency_key;
CREATE UNIQUE INDEX turns_idempotency_key ON turns (tenant_id, session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Sessions are updated twice a turn and turns once: room on the page lets
-- Postgres update in place, without touching their indexes (HOT updates).
ALTER TABLE sessions SET (fillfactor = 80);
ALTER TABLE turns SET (fillfactor = 80);

-- +goose Down
ALTER TABLE turns RESET (fillfactor);
ALTER TABLE sessions RESET (fillfactor);
DROP INDEX turns_idempotency_key;
CREATE UNIQUE INDEX turns_idempotency_key ON turns (tenant_id, session_id, idempotency_key);
CREATE INDEX messages_turn ON messages (tenant_id, session_id, turn_id, seq) WHERE turn_id IS NOT NULL;
ALTER TABLE turns DROP COLUMN first_seq;
CREATE TABLE turn_events (
    tenant_id  uuid   NOT NULL,
    session_id text   NOT NULL,
    turn_id    text   NOT NULL,
    seq        integer NOT NULL,
    type       text   NOT NULL,
    data       json   NOT NULL,
    PRIMARY KEY (tenant_id, session_id, turn_id, seq),
    FOREIGN KEY (tenant_id, session_id, turn_id) REFERENCES turns (tenant_id, session_id, id) ON DELETE CASCADE
);
DROP TABLE turn_event_batches;
ALTER TABLE turns DROP COLUMN events;
ALTER TABLE turns DROP COLUMN step;
