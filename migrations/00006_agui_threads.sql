-- +goose Up
-- AG-UI (docs/protocols.md): a client names its conversation with a thread
-- id of its own choosing, and sends the whole thread on every run.
--
-- sessions.thread_id is the thread a session was created for. Thread ids are
-- the client's, so they are unique per tenant and per owner (an end user's
-- thread "t1" is not another's, nor an API key's): one tenant's id can
-- neither reach nor collide with another's session.
ALTER TABLE sessions ADD COLUMN thread_id text;
CREATE UNIQUE INDEX sessions_thread ON sessions (tenant_id, (coalesce(owner, '')), thread_id)
    WHERE thread_id IS NOT NULL;

-- The ids clients gave the messages they sent, so that a message sent again
-- with the rest of its thread is recognised and not stored twice. Written in
-- the transaction that stores the message.
CREATE TABLE message_client_ids (
    tenant_id  uuid   NOT NULL,
    session_id text   NOT NULL,
    client_id  text   NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (tenant_id, session_id, client_id),
    FOREIGN KEY (tenant_id, session_id, seq) REFERENCES messages (tenant_id, session_id, seq) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE message_client_ids;
DROP INDEX sessions_thread;
ALTER TABLE sessions DROP COLUMN thread_id;
