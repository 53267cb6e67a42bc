-- +goose Up
-- Retention (docs/lifecycle.md, "Retention"): how long a tenant keeps its
-- conversations. NULL is the server's default (flags of aapd serve), which
-- is "forever" unless an operator set one.
--
-- tenants.retention_idle_session_days: a session with no turn and no change
-- for longer is deleted by the sweeper (package retention).
-- tenants.retention_full_history_days: full-history messages older than
-- this that a compaction has already summarised may be dropped; the
-- compacted history stays whole.
-- (The checks are statements of their own, named as inline ones would be:
-- Citus adds no column with a constraint to a reference table.)
ALTER TABLE tenants
    ADD COLUMN retention_idle_session_days integer,
    ADD COLUMN retention_full_history_days integer;
ALTER TABLE tenants ADD CONSTRAINT tenants_retention_idle_session_days_check CHECK (retention_idle_session_days > 0);
ALTER TABLE tenants ADD CONSTRAINT tenants_retention_full_history_days_check CHECK (retention_full_history_days > 0);

-- sessions.history_trimmed_through: the full history's messages 1 to this
-- seq were dropped by retention (0: none); a history read says so.
ALTER TABLE sessions ADD COLUMN history_trimmed_through bigint NOT NULL DEFAULT 0;

-- The sweeper finds a tenant's idle sessions, oldest first, without
-- reading the others.
CREATE INDEX sessions_idle ON sessions (tenant_id, updated_at);

-- Deleting a session deletes the idempotency keys that created it (a row
-- of it like any other): found by the session, not by reading every key of
-- the tenant.
CREATE INDEX idempotency_keys_session ON idempotency_keys (tenant_id, session_id);

-- +goose Down
DROP INDEX idempotency_keys_session;
DROP INDEX sessions_idle;
ALTER TABLE sessions DROP COLUMN history_trimmed_through;
ALTER TABLE tenants DROP COLUMN retention_full_history_days, DROP COLUMN retention_idle_session_days;
