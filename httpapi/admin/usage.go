package admin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aapd/aapd/store"
)

// Bounds of a usage report.
const (
	// DefaultUsageDays is the period reported when none is given: the last
	// 30 UTC days, today included.
	DefaultUsageDays = 30
	// MaxUsageSpan bounds a report's period, so one request cannot make
	// the database add up years of turns.
	MaxUsageSpan = 366 * 24 * time.Hour
)

// UsageCounts is what was used.
type UsageCounts struct {
	Turns        int64 `json:"turns"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

func (c *UsageCounts) add(r store.UsageRow) {
	c.Turns += r.Turns
	c.InputTokens += r.InputTokens
	c.OutputTokens += r.OutputTokens
}

// AgentUsage is what one agent used over the period.
type AgentUsage struct {
	Agent string `json:"agent"`
	UsageCounts
}

// DayUsage is what one agent used on one UTC day.
type DayUsage struct {
	Date  string `json:"date"` // YYYY-MM-DD, UTC
	Agent string `json:"agent"`
	UsageCounts
}

// Usage is a tenant's usage over [From, To): turns begun in the period,
// sessions deleted since included.
type Usage struct {
	Tenant string       `json:"tenant"`
	From   time.Time    `json:"from"`
	To     time.Time    `json:"to"`
	Totals UsageCounts  `json:"totals"`
	Agents []AgentUsage `json:"agents"`
	Days   []DayUsage   `json:"days"`
}

// parseUsageTime reads a bound of a usage period: RFC 3339, or a date
// (YYYY-MM-DD, UTC). A date as the end of a period includes that day.
func parseUsageTime(field, v string, end bool) (time.Time, error) {
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, invalid(field, "%q is neither RFC 3339 (2025-01-31T00:00:00Z) nor a date (2025-01-31)", v)
	}
	return t.UTC(), nil
}

// usagePeriod reads a period; either bound may be empty. Without a start,
// the period is the DefaultUsageDays days up to its end; without an end,
// it ends with today (UTC).
func (s *Service) usagePeriod(from, to string) (time.Time, time.Time, error) {
	var start, end time.Time
	var err error
	if to == "" {
		y, m, d := s.now().UTC().Date()
		end = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	} else if end, err = parseUsageTime("to", to, true); err != nil {
		return start, end, err
	}
	if from == "" {
		start = end.AddDate(0, 0, -DefaultUsageDays)
	} else if start, err = parseUsageTime("from", from, false); err != nil {
		return start, end, err
	}
	switch {
	case !start.Before(end):
		return start, end, invalid("from", "the period must start before it ends (from %s, to %s)", start.Format(time.RFC3339), end.Format(time.RFC3339))
	case end.Sub(start) > MaxUsageSpan:
		return start, end, invalid("to", "the period spans more than 366 days: ask for several shorter ones")
	}
	return start, end, nil
}

// Usage reports a tenant's turns and tokens per agent and day over a
// period (see usagePeriod for the bounds): whole UTC days are exact, also
// for sessions deleted since.
func (s *Service) Usage(ctx context.Context, tenant, from, to string) (Usage, error) {
	start, end, err := s.usagePeriod(from, to)
	if err != nil {
		return Usage{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return Usage{}, err
	}
	rows, err := s.st.Usage(ctx, t.ID, start, end)
	if err != nil {
		return Usage{}, err
	}
	out := Usage{Tenant: t.Name, From: start, To: end, Agents: []AgentUsage{}, Days: make([]DayUsage, 0, len(rows))}
	byAgent := map[string]int{}
	for _, r := range rows {
		out.Totals.add(r)
		day := DayUsage{Date: r.Day.Format(time.DateOnly), Agent: r.Agent}
		day.add(r)
		out.Days = append(out.Days, day)
		i, ok := byAgent[r.Agent]
		if !ok {
			i = len(out.Agents)
			byAgent[r.Agent] = i
			out.Agents = append(out.Agents, AgentUsage{Agent: r.Agent})
		}
		out.Agents[i].add(r)
	}
	slices.SortFunc(out.Agents, func(a, b AgentUsage) int { return strings.Compare(a.Agent, b.Agent) })
	return out, nil
}
