-- +goose Up
-- Fork, export and import (docs/lifecycle.md).
--
-- A fork names its origin: the session it was copied from and how many of
-- that session's full-history messages it took (the point). Both stay as
-- they were if the origin is deleted later.
ALTER TABLE sessions ADD COLUMN forked_from text, ADD COLUMN forked_at bigint;

-- A fork's full history up to its point is not copied: it is read where it
-- is, from the messages of the sessions it came from. Each row says that
-- the fork's messages first_seq..last_seq are the messages with the same
-- seqs of source_session_id (its own rows: a source is never itself a
-- range of another's). Seqs of the fork not covered by a range are its own
-- rows. Deleting a source first copies the ranges that forks still read
-- into them (store/inherited.go), so a row here always names a session
-- that exists.
CREATE TABLE inherited_messages (
    tenant_id         uuid   NOT NULL,
    session_id        text   NOT NULL,
    first_seq         bigint NOT NULL,
    last_seq          bigint NOT NULL,
    source_session_id text   NOT NULL,
    PRIMARY KEY (tenant_id, session_id, first_seq),
    CHECK (first_seq >= 1 AND first_seq <= last_seq)
);
-- What to copy before a session is deleted: the forks reading it.
CREATE INDEX inherited_messages_source ON inherited_messages (tenant_id, source_session_id);
SELECT aapd_distribute('inherited_messages', 'sessions');
ALTER TABLE inherited_messages ADD FOREIGN KEY (tenant_id, session_id)
    REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;

-- What each compaction replaced: the compacted history just before the
-- compaction rewrote it (every row up to its snapshot's last seq), so that
-- a fork at an earlier point gets the compacted history as it stood there.
-- Rows copying full-history messages are kept as runs: compacted seqs
-- seq..last_seq copy the full-history messages from source_seq on (the
-- compaction package keeps such rows byte-identical to their source). A
-- row compaction wrote (a summary, a placeholder) is kept whole: source_seq
-- NULL, last_seq = seq.
CREATE TABLE compaction_replaced (
    tenant_id     uuid   NOT NULL,
    session_id    text   NOT NULL,
    compaction_id bigint NOT NULL,
    seq           bigint NOT NULL,
    last_seq      bigint NOT NULL,
    source_seq    bigint,
    message       json,
    extra         json,
    PRIMARY KEY (tenant_id, session_id, compaction_id, seq),
    CHECK ((source_seq IS NULL) = (message IS NOT NULL)),
    CHECK (last_seq >= seq AND (source_seq IS NOT NULL OR last_seq = seq))
);
SELECT aapd_distribute('compaction_replaced', 'sessions');
ALTER TABLE compaction_replaced ADD FOREIGN KEY (tenant_id, session_id, compaction_id)
    REFERENCES compactions (tenant_id, session_id, id) ON DELETE CASCADE;

-- +goose Down
DROP TABLE compaction_replaced;
DROP TABLE inherited_messages;
ALTER TABLE sessions DROP COLUMN forked_at, DROP COLUMN forked_from;
