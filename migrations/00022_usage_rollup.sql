-- +goose Up
-- usage_daily becomes the whole of a tenant's usage, rolled up as turns
-- end, so that the usage report reads a few rows a day instead of
-- scanning the tenant's turns (store/usage.go, docs/operations.md).
--
-- A turn is added to the row of its tenant, its begin day (UTC) and its
-- session's agent in the transaction that ends it (TurnFinish, or the end
-- another process writes for it), or, if its session is deleted first, in
-- the deletion's. A day's usage is spread over slots, one per database
-- connection (its backend pid modulo 16), so that turns ending at once on
-- different connections update different rows instead of queueing for one
-- row lock; the report adds the slots up.
ALTER TABLE usage_daily ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY (tenant_id, day, agent_name, slot);

-- The turns that ended before this migration (those of deleted sessions
-- are in usage_daily already); turns still running are added as they end.
INSERT INTO usage_daily AS u (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens)
SELECT t.tenant_id, (t.created_at AT TIME ZONE 'UTC')::date, s.agent_name, 0,
       count(*), sum(t.input_tokens), sum(t.output_tokens)
FROM turns t JOIN sessions s ON s.tenant_id = t.tenant_id AND s.id = t.session_id
WHERE t.status NOT IN ('running', 'queued')
GROUP BY t.tenant_id, 2, s.agent_name
ON CONFLICT (tenant_id, day, agent_name, slot) DO UPDATE SET
    turns = u.turns + excluded.turns,
    input_tokens = u.input_tokens + excluded.input_tokens,
    output_tokens = u.output_tokens + excluded.output_tokens;

-- +goose Down
-- Back to usage_daily holding the usage of deleted sessions alone: the
-- ended turns of live sessions are taken out, then each day's slots are
-- added up into one row.
INSERT INTO usage_daily (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens)
SELECT t.tenant_id, (t.created_at AT TIME ZONE 'UTC')::date, s.agent_name, -1,
       -count(*), -sum(t.input_tokens), -sum(t.output_tokens)
FROM turns t JOIN sessions s ON s.tenant_id = t.tenant_id AND s.id = t.session_id
WHERE t.status NOT IN ('running', 'queued')
GROUP BY t.tenant_id, 2, s.agent_name;
INSERT INTO usage_daily (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens)
SELECT tenant_id, day, agent_name, -2, sum(turns), sum(input_tokens), sum(output_tokens)
FROM usage_daily GROUP BY tenant_id, day, agent_name;
DELETE FROM usage_daily WHERE slot <> -2 OR turns <= 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily DROP COLUMN slot;
ALTER TABLE usage_daily ADD PRIMARY KEY (tenant_id, day, agent_name);
