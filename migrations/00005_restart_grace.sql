-- +goose Up
-- A database restart drops every advisory lock: until each aapd process has
-- reconnected and taken its instance lock again, every process would look
-- dead, and a live turn would be ended by whoever looked first. For
-- 15 seconds after the server started, a missing lock proves nothing: an
-- instance counts as alive, and only an expired lease ends its turns.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aapd_instance_alive(instance integer) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT pg_postmaster_start_time() > now() - interval '15 seconds'
        OR EXISTS (
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aapd_instance_alive(instance integer) RETURNS boolean
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
