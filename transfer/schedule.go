package transfer

import (
	"encoding/json"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/scheduler/spec"
	"github.com/aapd/aapd/store"
)

// scheduleLine checks a schedule's line: a timing the server can read, a
// turn of one user message, counts that are counts.
func (v *validator) scheduleLine(line []byte) (store.ImportPart, error) {
	var l ScheduleLine
	if err := decodeLine(line, &l); err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleJSON, "%v", err)
	}
	if l.ID == "" || len(l.ID) > 255 {
		return store.ImportPart{}, v.lr.errAt(RuleValue, "a schedule needs an id of 1 to 255 bytes")
	}
	sc := store.Schedule{ID: l.ID, Cron: l.Cron, Timezone: l.Timezone, EndAt: l.EndAt, CreatedAt: l.CreatedAt,
		NextRunAt: l.NextRunAt, LastRunAt: l.LastRunAt, LastTurnID: l.LastTurn, Runs: l.Runs, SkippedRunning: l.SkippedRunning,
		SkippedMissed: l.SkippedMissed, SkippedRefused: l.SkippedRefused, LastError: l.LastError}
	if l.Every != "" {
		every, err := spec.ParseEveryText(l.Every)
		if err != nil {
			return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: %v", l.ID, err)
		}
		sc.Every = every
	}
	if _, err := spec.Parse(sc.Cron, sc.Timezone, sc.Every); err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: %v", l.ID, err)
	}
	if len(l.Messages) > spec.MaxMessagesBytes {
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: its turn has %d bytes, more than a schedule's may have (%d)", l.ID, len(l.Messages), spec.MaxMessagesBytes)
	}
	turn, err := json.Marshal(map[string]any{"messages": l.Messages, "stream": l.Stream})
	if err == nil {
		err = json.Unmarshal(turn, &sc.Request)
	}
	if err != nil {
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: %v", l.ID, err)
	}
	switch sc.Request.Mode() {
	case aap.StreamNone, aap.StreamDelta, aap.StreamMessage:
	default:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: unknown stream mode %q", l.ID, l.Stream)
	}
	switch {
	case len(sc.Request.Messages) != 1 || sc.Request.Messages[0].Role != aap.RoleUser:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: its turn is one user message", l.ID)
	case l.Runs < 0 || l.SkippedRunning < 0 || l.SkippedMissed < 0 || l.SkippedRefused < 0:
		return store.ImportPart{}, v.lr.errAt(RuleValue, "schedule %s: a negative count", l.ID)
	case l.CreatedAt.IsZero():
		sc.CreatedAt = time.Now()
	}
	v.counts.Schedules++
	return store.ImportPart{Schedule: &sc}, nil
}
