-- +goose Up
-- Every table but tenants has a primary key that starts with tenant_id, and
-- every query filters on it: the isolation rule, and what lets the schema be
-- distributed by tenant later.

CREATE TABLE tenants (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- An API key is shown once; only its SHA-256 hash is kept. public_id is the
-- part of the key that locates it (aapd_<public_id>_<secret>).
CREATE TABLE api_keys (
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    public_id    text        NOT NULL,
    hash         bytea       NOT NULL,
    name         text        NOT NULL DEFAULT '',
    scopes       text[]      NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    PRIMARY KEY (tenant_id, public_id)
);
CREATE UNIQUE INDEX api_keys_public_id ON api_keys (public_id);

CREATE TABLE sessions (
    tenant_id          uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                 text        NOT NULL,
    agent_name         text        NOT NULL,
    -- enabled server tools ([{name, trust}]); NULL when the client sent none
    agent_tools        json,
    -- option values the client set; secret ones live sealed in secret_options
    options            json        NOT NULL DEFAULT '{}',
    secret_options     bytea,
    -- client-side tools; NULL when none were declared
    client_tools       json,
    -- tool calls the session waits on after a tool_use stop
    pending_tool_calls json        NOT NULL DEFAULT '[]',
    -- highest seq used in messages and compacted_messages
    last_seq           bigint      NOT NULL DEFAULT 0,
    -- the claim of the running turn: a lease, not a lock held open
    active_turn_id     text,
    lease_owner        integer,
    lease_expires_at   timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- The full history: exact, append-only, ordered by seq. Stored as json (not
-- jsonb) so each message is kept byte for byte as it was written.
CREATE TABLE messages (
    tenant_id  uuid        NOT NULL,
    session_id text        NOT NULL,
    seq        bigint      NOT NULL,
    turn_id    text,
    -- who wrote it: the client (seed, user message, client tool result), the
    -- agent (model output, server tool result, denial) or the server itself
    -- (closing a tool call the user moved past)
    origin     text        NOT NULL CHECK (origin IN ('client', 'agent', 'server')),
    message    json        NOT NULL,
    extra      json,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE
);
-- A turn's messages (the body of a stream "none" response) are found
-- without reading the rest of a long history.
CREATE INDEX messages_turn ON messages (tenant_id, session_id, turn_id, seq) WHERE turn_id IS NOT NULL;

-- The compacted history: what the model sees. Appended with the full history
-- and rewritten by compaction; source_seq is the full-history message it
-- copies (NULL for a summary).
CREATE TABLE compacted_messages (
    tenant_id  uuid   NOT NULL,
    session_id text   NOT NULL,
    seq        bigint NOT NULL,
    source_seq bigint,
    message    json   NOT NULL,
    extra      json,
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE turns (
    tenant_id       uuid        NOT NULL,
    session_id      text        NOT NULL,
    id              text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'cancelled')),
    stream          text        NOT NULL,
    stop_reason     text,
    error           text,
    owner           integer,
    input_tokens    bigint      NOT NULL DEFAULT 0,
    output_tokens   bigint      NOT NULL DEFAULT 0,
    idempotency_key text,
    request_hash    bytea,
    -- set by POST .../cancel; the process running the turn stops it
    cancel_requested boolean    NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, session_id, id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX turns_idempotency_key ON turns (tenant_id, session_id, idempotency_key);

-- Every event a turn streamed, in order: what resumable streams and
-- idempotent replays send. seq is the event's SSE id.
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

-- Idempotency keys of POST /sessions: a retry with the same key and body
-- gets the first response back. Turn keys live on their turn.
CREATE TABLE idempotency_keys (
    tenant_id    uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    session_id   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (tenant_id, created_at);

-- Server-wide settings, not tenant data: today only the generated key that
-- seals secret options when no AAPD_ENCRYPTION_KEY is configured.
CREATE TABLE server_settings (
    name  text  PRIMARY KEY,
    value bytea NOT NULL
);

-- aapd_instance_alive reports whether the aapd process with this instance id
-- still holds its advisory lock, i.e. is still connected to the database. A
-- process that dies loses its connection and with it the lock, so a claim it
-- held can be taken over at once instead of waiting out the lease.
-- +goose StatementBegin
CREATE FUNCTION aapd_instance_alive(instance integer) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory'
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = 1094799428  -- 'AAPD', the lock's first key
          AND objid = (instance::bigint & 4294967295)::oid
          AND objsubid = 2
          AND granted)
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION aapd_instance_alive(integer);
DROP TABLE server_settings;
DROP TABLE idempotency_keys;
DROP TABLE turn_events;
DROP TABLE turns;
DROP TABLE compacted_messages;
DROP TABLE messages;
DROP TABLE sessions;
DROP TABLE api_keys;
DROP TABLE tenants;
