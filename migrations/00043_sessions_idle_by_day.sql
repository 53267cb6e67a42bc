-- +goose Up
-- sessions_idle (00017) indexed sessions.updated_at, which every turn sets
-- (its claim and its end): an update that changes an indexed column is
-- never a HOT update, so each one wrote a new entry in every index of
-- sessions and left a dead version behind it for every later lookup of
-- the session by its key to step over. On a turn's path that made the
-- claim, the inserts' foreign-key checks and the usage rollup's join
-- about twice as costly in PostgreSQL's CPU (docs/benchmarks.md, "The
-- cost of indexing updated_at"). The retention sweeper needs idle
-- sessions at a day's granularity only (its policy is in days), so the
-- index holds the UTC day of updated_at instead: a value that changes at
-- most once a day, which keeps every other update of the session HOT.
ALTER TABLE sessions ADD COLUMN updated_day date
    GENERATED ALWAYS AS ((updated_at AT TIME ZONE 'UTC')::date) STORED;
DROP INDEX sessions_idle;
CREATE INDEX sessions_idle ON sessions (tenant_id, updated_day);

-- +goose Down
DROP INDEX sessions_idle;
ALTER TABLE sessions DROP COLUMN updated_day;
CREATE INDEX sessions_idle ON sessions (tenant_id, updated_at);
