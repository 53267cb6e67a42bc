-- +goose Up
-- Fork, export and import (docs/lifecycle.md).
--
-- A fork names its origin: the session it was copied from and how many of
-- that session's full-history messages it took (the point). Both stay as
-- they were if the origin is deleted later.
ALTER TABLE sessions ADD COLUMN forked_from text, ADD COLUMN forked_at bigint;

-- What each compaction replaced: the compacted history as it stood just
-- before the compaction rewrote it (every row up to its snapshot's last
-- seq), so that a fork at an earlier point gets the compacted history as it
-- stood there. A row copying a full-history message (source_seq set) is
-- kept as that reference alone: compaction keeps such rows byte-identical
-- to their source (compaction/doc.go). A row compaction wrote (a summary, a
-- placeholder; source_seq NULL) is kept whole.
CREATE TABLE compaction_replaced (
    tenant_id     uuid   NOT NULL,
    session_id    text   NOT NULL,
    compaction_id bigint NOT NULL,
    seq           bigint NOT NULL,
    source_seq    bigint,
    message       json,
    extra         json,
    PRIMARY KEY (tenant_id, session_id, compaction_id, seq),
    CHECK ((source_seq IS NULL) = (message IS NOT NULL))
);
SELECT aapd_distribute('compaction_replaced', 'sessions');
ALTER TABLE compaction_replaced ADD FOREIGN KEY (tenant_id, session_id, compaction_id)
    REFERENCES compactions (tenant_id, session_id, id) ON DELETE CASCADE;

-- +goose Down
DROP TABLE compaction_replaced;
ALTER TABLE sessions DROP COLUMN forked_at, DROP COLUMN forked_from;
