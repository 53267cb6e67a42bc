-- turn_none.sql with the usage rollup aapd adds to a turn's end (store/usage.go, docs/operations.md).
-- One aapd turn (stream "none", one model step, no tools), statement for statement as aapd runs it
-- since the one-round-trip claim (read from log_statement=all, the echo agent, a session the process
-- left as it is): 2 round trips (two pipelines), 2 commits, the first not waiting for the disk (the
-- client hears of the turn only after the second, which flushes the first's WAL too). Run with
-- -M prepared (pgx caches prepared statements the same way) and -D tenant=<uuid> -D pub=<api key
-- public id> -D m=<sessions per client> -D off=<first session number>. Sessions sess_<32-digit n>
-- must exist (seed.sql); each client uses its own m sessions, so no two clients ever touch one
-- session (aapd would answer 409).
-- What cannot be replayed: the claim's guard compares the row's xmin and updated_at with the values
-- the previous turn's end returned, which pgbench does not know; it compares them with themselves
-- (the same work). Seqs are random (unique per session), where aapd counts them.
\set t random(1, 9000000000000000000)
\set q random(1, 4000000000000000000)
\set q2 :q + 1
\set s :off + :client_id * :m + random(0, :m - 1)
-- round trip 1: the claim, the turn's record, the user's message in both histories; one commit
\startpipeline
BEGIN;
SET LOCAL synchronous_commit TO off;
WITH claim AS (UPDATE sessions SET agent_tools = NULL, options = '{}', secret_options = NULL, client_tools = NULL, pending_tool_calls = '[]', active_turn_id = 'turn_' || :t, lease_owner = 1222225720, lease_expires_at = now() + 30000 * interval '1 millisecond', last_seq = :q, updated_at = now() WHERE tenant_id = :tenant AND id = 'sess_' || lpad(:s::text, 32, '0') AND xmin = xmin AND updated_at = updated_at AND active_turn_id IS NULL AND ('' = '' OR owner = '') RETURNING 1) SELECT 1 / (SELECT count(*) FROM claim);
INSERT INTO turns (tenant_id, session_id, id, status, stream, owner, idempotency_key, request_hash, first_seq) VALUES (:tenant, 'sess_' || lpad(:s::text, 32, '0'), 'turn_' || :t, 'running', 'none', 1222225720, nullif('', ''), NULL, :q) RETURNING tenant_id::text, session_id, id, status, stream, coalesce(stop_reason, ''), coalesce(error_type, ''), coalesce(error, ''), input_tokens, output_tokens, coalesce(idempotency_key, ''), created_at, finished_at;
INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra) VALUES (:tenant, 'sess_' || lpad(:s::text, 32, '0'), :q::bigint, ('turn_' || :t)::text, 'client'::text, '{"role":"user","content":"Hello there, how are you doing today?"}'::text::json, NULL::text::json);
INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra) VALUES (:tenant, 'sess_' || lpad(:s::text, 32, '0'), :q::bigint, :q::bigint, '{"role":"user","content":"Hello there, how are you doing today?"}'::text::json, NULL::text::json);
COMMIT;
\endpipeline
-- (the model runs)
-- round trip 2: the turn's end: the session released, the record with its folded event log, the
-- agent's message in both histories; one commit
\startpipeline
BEGIN;
WITH claim AS (UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL, last_seq = :q2, pending_tool_calls = '[]', updated_at = now(), reported_tokens = CASE WHEN 0 > 0 THEN 0 ELSE reported_tokens END, reported_upto_seq = CASE WHEN 0 > 0 THEN 0 ELSE reported_upto_seq END WHERE tenant_id = :tenant AND id = 'sess_' || lpad(:s::text, 32, '0') AND active_turn_id = 'turn_' || :t RETURNING xmin, updated_at), turn AS (UPDATE turns SET status = 'completed', stop_reason = nullif('end_turn', ''), error = nullif('', ''), error_type = nullif('', ''), input_tokens = 0, output_tokens = 0, finished_at = now(), step = 1, events = '[{"t":"turn_start","d":{}},{"t":"text","d":{"text":"Hello there, how are you doing today?"}},{"t":"turn_stop","d":{"stopReason":"end_turn"}}]'::json WHERE tenant_id = :tenant AND session_id = 'sess_' || lpad(:s::text, 32, '0') AND id = 'turn_' || :t AND status = 'running' AND step < 1 AND EXISTS (SELECT 1 FROM claim) RETURNING 1), batches AS (DELETE FROM turn_event_batches WHERE tenant_id = :tenant AND session_id = 'sess_' || lpad(:s::text, 32, '0') AND turn_id = 'turn_' || :t AND EXISTS (SELECT 1 FROM turn)) SELECT (SELECT xmin::text FROM claim), (SELECT updated_at FROM claim), 1 / (SELECT count(*) FROM turn);
INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra) VALUES (:tenant, 'sess_' || lpad(:s::text, 32, '0'), :q2::bigint, ('turn_' || :t)::text, 'agent'::text, '{"role":"assistant","content":"Hello there, how are you doing today?"}'::text::json, NULL::text::json);
INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra) VALUES (:tenant, 'sess_' || lpad(:s::text, 32, '0'), :q2::bigint, :q2::bigint, '{"role":"assistant","content":"Hello there, how are you doing today?"}'::text::json, NULL::text::json);
INSERT INTO usage_daily AS u (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens) SELECT t.tenant_id, (t.created_at AT TIME ZONE 'UTC')::date, s.agent_name, pg_backend_pid() % 16, count(*), sum(t.input_tokens), sum(t.output_tokens) FROM turns t JOIN sessions s ON s.tenant_id = t.tenant_id AND s.id = t.session_id WHERE t.tenant_id = :tenant AND t.session_id = 'sess_' || lpad(:s::text, 32, '0') AND t.id = 'turn_' || :t GROUP BY 1, 2, 3 ON CONFLICT (tenant_id, day, agent_name, slot) DO UPDATE SET turns = u.turns + excluded.turns, input_tokens = u.input_tokens + excluded.input_tokens, output_tokens = u.output_tokens + excluded.output_tokens;
COMMIT;
\endpipeline
