-- +goose Up
-- The tenant wall (docs/security.md): row-level security on every table a
-- tenant owns, so that a query missing its tenant filter still sees only
-- the rows of the tenant its transaction declared.
--
-- Roles. aapd serves as aapd_app, which only reads and writes and is held
-- by the policies; the work that spans tenants (authentication, heartbeats,
-- the dispatcher, deliverers, sweepers) runs as aapd_chores, which bypasses
-- them. Neither owns a table. The server's login role (the URL it serves
-- with) sets one or the other per connection (store.Open): a superuser can,
-- and so can any role that was granted both (docs/operations.md). On Citus
-- the coordinator connects to the workers as the role the session has set,
-- so there both roles can log in (without a password: they are reached
-- through trust or a .pgpass entry the operator sets up, docs/citus.md).
--
-- Creating a BYPASSRLS role takes a superuser: an owner that is not one
-- has the roles created for it first (docs/operations.md says how).
-- +goose StatementBegin
DO $$
DECLARE
    citus boolean := EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus');
    login text := CASE WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN 'LOGIN' ELSE 'NOLOGIN' END;
    r record;
BEGIN
    FOR r IN SELECT * FROM (VALUES ('aapd_app', 'NOBYPASSRLS'), ('aapd_chores', 'BYPASSRLS')) AS v(name, bypass) LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.name) THEN
            IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                RAISE EXCEPTION 'role % does not exist, and % may not create it', r.name, current_user
                    USING HINT = 'create the roles aapd_app and aapd_chores as a superuser first (docs/operations.md)';
            END IF;
            BEGIN
                EXECUTE format('CREATE ROLE %I %s NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT %s', r.name, login, r.bypass);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it meanwhile
            END;
        ELSIF citus AND NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = r.name)
              AND (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            EXECUTE format('ALTER ROLE %I LOGIN', r.name);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA public TO aapd_app, aapd_chores;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO aapd_app, aapd_chores;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO aapd_app, aapd_chores;
REVOKE INSERT, UPDATE, DELETE ON goose_db_version FROM aapd_app, aapd_chores;
-- The tables later migrations create are granted as they are created.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO aapd_app, aapd_chores;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO aapd_app, aapd_chores;

-- aapd_declare_tenant(tenant) declares the tenant of the transaction it
-- runs in, until it ends: the policies below admit that tenant's rows only.
-- store sends it right after BEGIN, in the same round trip. On Citus the
-- declaration must reach the workers, which read it there: a SET LOCAL
-- inside a transaction block does (with citus.propagate_set_commands =
-- local), set_config does not.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        CREATE FUNCTION aapd_declare_tenant(tenant uuid) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN
            SET LOCAL citus.propagate_set_commands = 'local';
            EXECUTE format('SET LOCAL aapd.tenant_id = %L', tenant);
        END
        $f$;
    ELSE
        CREATE FUNCTION aapd_declare_tenant(tenant uuid) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN
            PERFORM set_config('aapd.tenant_id', tenant::text, true);
        END
        $f$;
    END IF;
END
$$;
-- +goose StatementEnd

-- aapd_tenant_wall(tbl) puts the wall on one table: row-level security,
-- forced on its owner too, and the one policy. A migration that creates a
-- tenant-owned table after this one ends with
--   SELECT aapd_tenant_wall('the_table');
-- (store's TestEveryTenantTableHasTheWall fails until it does).
-- +goose StatementBegin
CREATE FUNCTION aapd_tenant_wall(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS tenant_wall ON %s', tbl);
    EXECUTE format($p$CREATE POLICY tenant_wall ON %s
        USING (tenant_id = nullif(current_setting('aapd.tenant_id', true), '')::uuid)
        WITH CHECK (tenant_id = nullif(current_setting('aapd.tenant_id', true), '')::uuid)$p$, tbl);
END
$$;
-- +goose StatementEnd

-- Every table of the schema with a tenant_id column, those of the
-- migrations numbered below this one that land after it included.
-- +goose StatementBegin
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
             WHERE c.relkind IN ('r', 'p') ORDER BY c.relname LOOP
        PERFORM aapd_tenant_wall(t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
             WHERE c.relkind IN ('r', 'p') LOOP
        EXECUTE format('DROP POLICY IF EXISTS tenant_wall ON %s', t);
        EXECUTE format('ALTER TABLE %s NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION aapd_tenant_wall(regclass);
DROP FUNCTION aapd_declare_tenant(uuid);
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT, UPDATE, DELETE ON TABLES FROM aapd_app, aapd_chores;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE USAGE, SELECT, UPDATE ON SEQUENCES FROM aapd_app, aapd_chores;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM aapd_app, aapd_chores;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM aapd_app, aapd_chores;
REVOKE USAGE ON SCHEMA public FROM aapd_app, aapd_chores;
