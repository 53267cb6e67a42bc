-- +goose Up
-- A full-history trim drops the event logs of the ended turns its prefix
-- covers whole (store/historytrim.go: turns.events becomes
-- {"trimmed":true}), in the transaction that drops their messages. The
-- sessions trimmed before it did still keep those logs, which repeat the
-- trimmed messages' text: this drops them once, by the trim's own rule. An
-- ended turn is inside the prefix once the next turn (by first_seq, then
-- created_at and id) starts at most one past it; the last turn before the
-- prefix's end keeps its log, as the trim keeps it.
--
-- turns and sessions are behind the tenant wall (00030), forced on their
-- owner too: a migration run by an owner that is no superuser sees a
-- tenant's rows only once it has declared the tenant, so it goes tenant by
-- tenant (tenants is not walled), each UPDATE within one tenant (on Citus,
-- one shard group).
-- +goose StatementBegin
DO $$
DECLARE
    tenant uuid;
BEGIN
    FOR tenant IN SELECT id FROM tenants ORDER BY id LOOP
        PERFORM aapd_declare_tenant(tenant);
        UPDATE turns t SET events = '{"trimmed":true}'::json
        FROM (SELECT tu.session_id, tu.id, s.history_trimmed_through AS through,
                     lead(tu.first_seq) OVER (PARTITION BY tu.session_id ORDER BY tu.first_seq, tu.created_at, tu.id) AS next_seq
              FROM turns tu JOIN sessions s ON s.tenant_id = tu.tenant_id AND s.id = tu.session_id
              WHERE tu.tenant_id = tenant AND s.tenant_id = tenant AND s.history_trimmed_through > 0
                AND tu.first_seq IS NOT NULL AND tu.first_seq <= s.history_trimmed_through + 1) x
        WHERE t.tenant_id = tenant AND t.session_id = x.session_id AND t.id = x.id
          AND x.next_seq <= x.through + 1
          AND t.status IN ('completed', 'failed', 'interrupted', 'cancelled')
          AND t.events::text IS DISTINCT FROM '{"trimmed":true}';
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Nothing to undo: the dropped logs are gone, and a trim drops them all
-- the same.
