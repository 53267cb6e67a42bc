-- +goose Up
-- Compaction rewrites the compacted history in place. compaction_version
-- lets it apply its result only if no other compaction ran meanwhile
-- (turns only append after the range it rewrites, so they never conflict).
ALTER TABLE sessions ADD COLUMN compaction_version bigint NOT NULL DEFAULT 0;

-- The input tokens the provider reported for the last model call of the
-- last turn, and the highest compacted seq that call saw: token counting
-- starts from what the provider measured and estimates only what came after.
ALTER TABLE sessions ADD COLUMN reported_tokens bigint;
ALTER TABLE sessions ADD COLUMN reported_upto_seq bigint;

-- One row per compaction: when, which part of the full history it covered,
-- how, and what it saved.
CREATE TABLE compactions (
    tenant_id       uuid        NOT NULL,
    session_id      text        NOT NULL,
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    trigger         text        NOT NULL CHECK (trigger IN ('auto', 'manual')),
    strategy        text        NOT NULL,
    from_seq        bigint      NOT NULL,
    to_seq          bigint      NOT NULL,
    messages_before integer     NOT NULL,
    messages_after  integer     NOT NULL,
    tokens_before   bigint      NOT NULL,
    tokens_after    bigint      NOT NULL,
    PRIMARY KEY (tenant_id, session_id, id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE
);

-- Compaction deletes the start of a compacted history in one go; vacuum
-- those dead rows soon rather than after a fifth of the table has churned.
ALTER TABLE compacted_messages SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);

-- +goose Down
ALTER TABLE compacted_messages RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
DROP TABLE compactions;
ALTER TABLE sessions DROP COLUMN reported_upto_seq;
ALTER TABLE sessions DROP COLUMN reported_tokens;
ALTER TABLE sessions DROP COLUMN compaction_version;
