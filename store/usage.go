package store

import (
	"context"
	"fmt"
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

// usageSQL adds up a tenant's turns ($1) begun in [$2, $3): those of live
// sessions from their records, those of deleted sessions from usage_daily,
// where deleting a session rolled them up (SessionDeleteOwned). Days are UTC.
const usageSQL = `
	SELECT day, agent_name, sum(turns)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint FROM (
		SELECT (t.created_at AT TIME ZONE 'UTC')::date AS day, s.agent_name, count(*) AS turns,
		       sum(t.input_tokens) AS input_tokens, sum(t.output_tokens) AS output_tokens
		FROM turns t JOIN sessions s ON s.tenant_id = t.tenant_id AND s.id = t.session_id
		WHERE t.tenant_id = $1 AND t.created_at >= $2 AND t.created_at < $3
		GROUP BY 1, 2
		UNION ALL
		SELECT day, agent_name, turns, input_tokens, output_tokens FROM usage_daily
		WHERE tenant_id = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date AND day < ($3::timestamptz AT TIME ZONE 'UTC')::date
	) u
	GROUP BY day, agent_name
	ORDER BY day, agent_name`

// Usage reports a tenant's turns and tokens per day and agent for the turns
// begun in [from, to). Deleted sessions count in whole UTC days: give day
// boundaries for exact figures.
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
