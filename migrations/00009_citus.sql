-- +goose Up
-- Scale-out on Citus (docs/citus.md). When the database has the citus
-- extension, every table a tenant owns is distributed by tenant_id, all of
-- them colocated with sessions, and the tables read without a tenant
-- (tenants, api_keys, token_issuers, server_settings) become reference
-- tables, copied to every node. On plain PostgreSQL this migration does
-- nothing.
--
-- aapd_distribute is kept for the migrations after this one: a migration
-- that creates a tenant-owned table ends with
--   SELECT aapd_distribute('the_table', 'sessions');
-- and one that creates a table read without a tenant with
--   SELECT aapd_distribute('the_table', NULL);
-- Both are no-ops without Citus.
-- +goose StatementBegin
CREATE FUNCTION aapd_distribute(tbl regclass, colocate_with text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    fk record;
    fks text[] := '{}';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- A foreign key to a reference table would make the table a "Citus
    -- local" one, which can no longer be distributed: drop the table's
    -- foreign keys, distribute it, and add them back (each includes
    -- tenant_id, which Citus requires).
    FOR fk IN SELECT conname, pg_get_constraintdef(oid) AS def
              FROM pg_constraint WHERE conrelid = tbl AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, fk.conname);
        fks := fks || format('ALTER TABLE %s ADD CONSTRAINT %I %s', tbl, fk.conname, fk.def);
    END LOOP;
    IF colocate_with IS NULL THEN
        PERFORM create_reference_table(tbl);
    ELSIF colocate_with = tbl::text THEN
        PERFORM create_distributed_table(tbl, 'tenant_id', colocate_with => 'none');
    ELSE
        PERFORM create_distributed_table(tbl, 'tenant_id', colocate_with => colocate_with);
    END IF;
    FOR i IN 1 .. coalesce(array_length(fks, 1), 0) LOOP
        EXECUTE fks[i];
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- Inside goose's transaction, DDL on tables with foreign keys to
    -- reference tables must run over one connection per node.
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    -- Children before parents: a table's foreign keys are dropped and added
    -- back by aapd_distribute, and a key can only be added back once the
    -- table it references is distributed too, so parents go first below,
    -- after every child's keys are out of the way.
    ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_tenant_id_fkey;
    ALTER TABLE token_issuers DROP CONSTRAINT IF EXISTS token_issuers_tenant_id_fkey;
    ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_tenant_id_fkey;
    ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_tenant_id_fkey;
    ALTER TABLE usage_daily DROP CONSTRAINT IF EXISTS usage_daily_tenant_id_fkey;
    ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_tenant_id_session_id_fkey;
    ALTER TABLE compacted_messages DROP CONSTRAINT IF EXISTS compacted_messages_tenant_id_session_id_fkey;
    ALTER TABLE compactions DROP CONSTRAINT IF EXISTS compactions_tenant_id_session_id_fkey;
    ALTER TABLE turns DROP CONSTRAINT IF EXISTS turns_tenant_id_session_id_fkey;
    ALTER TABLE turn_event_batches DROP CONSTRAINT IF EXISTS turn_event_batches_tenant_id_session_id_turn_id_fkey;
    ALTER TABLE message_client_ids DROP CONSTRAINT IF EXISTS message_client_ids_tenant_id_session_id_seq_fkey;

    PERFORM aapd_distribute('tenants', NULL);
    PERFORM aapd_distribute('api_keys', NULL);
    PERFORM aapd_distribute('token_issuers', NULL);
    PERFORM aapd_distribute('server_settings', NULL);
    PERFORM aapd_distribute('sessions', 'sessions');
    PERFORM aapd_distribute('idempotency_keys', 'sessions');
    PERFORM aapd_distribute('usage_daily', 'sessions');
    PERFORM aapd_distribute('messages', 'sessions');
    PERFORM aapd_distribute('compacted_messages', 'sessions');
    PERFORM aapd_distribute('compactions', 'sessions');
    PERFORM aapd_distribute('turns', 'sessions');
    PERFORM aapd_distribute('turn_event_batches', 'sessions');
    PERFORM aapd_distribute('message_client_ids', 'sessions');

    ALTER TABLE api_keys ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
    ALTER TABLE token_issuers ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
    ALTER TABLE sessions ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
    ALTER TABLE idempotency_keys ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
    ALTER TABLE usage_daily ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
    ALTER TABLE messages ADD FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;
    ALTER TABLE compacted_messages ADD FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;
    ALTER TABLE compactions ADD FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;
    ALTER TABLE turns ADD FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) ON DELETE CASCADE;
    ALTER TABLE turn_event_batches ADD FOREIGN KEY (tenant_id, session_id, turn_id) REFERENCES turns (tenant_id, session_id, id) ON DELETE CASCADE;
    ALTER TABLE message_client_ids ADD FOREIGN KEY (tenant_id, session_id, seq) REFERENCES messages (tenant_id, session_id, seq) ON DELETE CASCADE;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Undistributing is not automated: on Citus, copy the data out first.
DROP FUNCTION aapd_distribute(regclass, text);
