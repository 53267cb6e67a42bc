-- +goose Up
-- sessions_idle (00043) led with tenant_id, as sessions_pkey does. On a
-- table without statistics yet (a new database, or one restored, until
-- autovacuum first analyzes it) the planner costs a lookup of a session by
-- its key (tenant_id, id) the same through either index, and took the
-- newer one, sessions_idle, filtering on id: every foreign-key check of a
-- turn's inserts (messages, compacted_messages, turns → sessions) and the
-- usage rollup's join read every session of the tenant updated that day,
-- more with each session created (docs/benchmarks.md, "P1 decayed
-- within a run"). A partial index serves only a query whose conditions
-- imply its predicate: the sweeper's (updated_day <= …) does, a lookup by
-- the key does not, so sessions_idle can no longer stand in for the key.
-- updated_day is never NULL (updated_at is NOT NULL): the index holds
-- every session, as before, and stays off every column a turn sets.
DROP INDEX sessions_idle;
CREATE INDEX sessions_idle ON sessions (tenant_id, updated_day) WHERE updated_day IS NOT NULL;

-- +goose Down
DROP INDEX sessions_idle;
CREATE INDEX sessions_idle ON sessions (tenant_id, updated_day);
