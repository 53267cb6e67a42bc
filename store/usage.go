package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// UsageRow is what a tenant used on one day (UTC) with one agent.
type UsageRow struct {
	Day          time.Time // midnight UTC
	Agent        string
	Turns        int64
	InputTokens  int64
	OutputTokens int64
}

// usageRollup adds turns of one session ($1 tenant, $2 session) that
// match a condition to usage_daily, on the row of their begin day (UTC),
// their session's agent and the connection's slot, with the turn count and
// tokens each has so far. A day's usage of an agent is spread over
// usageSlotCount slots, and each connection of a process adds to a slot of
// its own (usageSlots, set as the connection starts), so that turns ending
// at once on different connections do not queue for one row lock, which a
// turn's end holds until its commit's disk flush. Slots chosen by backend
// pid (pg_backend_pid() % 16, before) collided: at 8 clients the rollup's
// statement waited 1–3 ms a turn on another connection's commit
// (docs/benchmarks.md). A connection without the setting (a Citus
// worker's, running the statement for the coordinator) falls back to its
// backend pid. The report adds the slots up, reading at most
// usageSlotCount rows a day and agent however many turns there were. Each
// turn is added once, in the transaction that ends it (TurnFinish's
// guard, usageEndSQL; queueEnd) or, if its session is deleted before it
// ends, in the deletion's (deleteSession): a usage report reads
// usage_daily alone, and deleting a session never shrinks it. Each
// condition is a statement of its own, so that a prepared statement's
// generic plan reads the one turn by its key.
var (
	usageRollupHead = `
	INSERT INTO usage_daily AS u (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens)
	SELECT t.tenant_id, (t.created_at AT TIME ZONE 'UTC')::date, s.agent_name, ` + usageSlotSQL + `,
		count(*), sum(t.input_tokens), sum(t.output_tokens)
	FROM turns t JOIN sessions s ON s.tenant_id = t.tenant_id AND s.id = t.session_id
	WHERE t.tenant_id = $1 AND t.session_id = $2 AND `
	// usageSlotSQL is the connection's slot: its setting, or its backend
	// pid's remainder where it has none.
	usageSlotSQL    = `coalesce(nullif(current_setting('` + usageSlotParam + `', true), '')::smallint, pg_backend_pid() % ` + strconv.Itoa(usageSlotCount) + `)`
	usageRollupTail = `
	GROUP BY 1, 2, 3` + usageAddSQL
	// usageAddSQL adds a row inserted into usage_daily to the row of its
	// day, agent and slot, if there is one.
	usageAddSQL = `
	ON CONFLICT (tenant_id, day, agent_name, slot) DO UPDATE SET
		turns = u.turns + excluded.turns,
		input_tokens = u.input_tokens + excluded.input_tokens,
		output_tokens = u.output_tokens + excluded.output_tokens`
	// usageEndSQL adds the turn TurnFinish's guard ends, a statement of
	// the guard (its CTE "usage"): its begin day from the guard's turn
	// CTE, its agent from the claim CTE, its tokens $11 and $12 as the
	// turn's update writes them. It adds nothing when the guard ends no
	// turn (its transaction is voided then anyway). One statement fewer a
	// turn than usageRollup's, and no join: the guard has read both rows.
	usageEndSQL = `INSERT INTO usage_daily AS u (tenant_id, day, agent_name, slot, turns, input_tokens, output_tokens)
			SELECT $1, (turn.created_at AT TIME ZONE 'UTC')::date, claim.agent_name, ` + usageSlotSQL + `, 1, $11, $12
			FROM turn, claim` + usageAddSQL
	// usageRunningTurnSQL adds turn $3 if it still runs.
	usageRunningTurnSQL = usageRollupHead + `t.id = $3 AND t.status = 'running'` + usageRollupTail
	// usageRunningSQL adds the session's turn still running, if any.
	usageRunningSQL = usageRollupHead + `t.status = 'running'` + usageRollupTail
)

// usageSlotParam is the setting that holds a connection's slot;
// usageSlotCount the number of slots.
const (
	usageSlotParam = "aapd.usage_slot"
	usageSlotCount = 64
)

// usageSlots hands out the slots of a process's connections in turn,
// starting at a random one, so that two replicas' connections seldom share
// one either.
type usageSlots struct{ n atomic.Uint32 }

func newUsageSlots() *usageSlots {
	s := &usageSlots{}
	s.n.Store(rand.Uint32N(usageSlotCount))
	return s
}

// next is the slot of the next connection, as the setting's text.
func (s *usageSlots) next() string {
	return strconv.Itoa(int(s.n.Add(1) % usageSlotCount))
}

// usageTurnEnding is the statement adding a turn whose end the
// transaction writes to its tenant's usage (usageRollup), once: queued
// after the turn's row is locked and before its end is written (queueEnd),
// it adds the turn only if it still runs, so that the end that follows is
// the one that counts. (TurnFinish adds its turn in its guard:
// usageEndSQL.)
func usageTurnEnding(ref TurnRef) batchStmt {
	return batchStmt{sql: usageRunningTurnSQL, args: []any{ref.TenantID, ref.SessionID, ref.TurnID}}
}

// usageSQL adds up a tenant's ($1) usage of the UTC days from $2 to $3
// (excluded), slots included.
const usageSQL = `
	SELECT day, agent_name, sum(turns)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint
	FROM usage_daily
	WHERE tenant_id = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date AND day < ($3::timestamptz AT TIME ZONE 'UTC')::date
	GROUP BY day, agent_name
	ORDER BY day, agent_name`

// Usage reports a tenant's turns and tokens per day and agent for the turns
// begun on the UTC days from from's to to's (excluded; a bound within a day
// stands for that day's start), that have ended or whose session was
// deleted first: a turn counts once it ends, with its tokens. It reads the
// rollup (usage_daily), a few rows a day and agent, never the turns.
func (s *Store) Usage(ctx context.Context, tenantID string, from, to time.Time) ([]UsageRow, error) {
	rows, err := s.tenant(tenantID).Query(ctx, usageSQL, tenantID, from, to)
	if err != nil {
		return nil, fmt.Errorf("usage of tenant %s: %w", tenantID, interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UsageRow, error) {
		var u UsageRow
		err := row.Scan(&u.Day, &u.Agent, &u.Turns, &u.InputTokens, &u.OutputTokens)
		u.Day = time.Date(u.Day.Year(), u.Day.Month(), u.Day.Day(), 0, 0, 0, 0, time.UTC)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("usage of tenant %s: %w", tenantID, interpretError(err))
	}
	return out, nil
}
