package transfer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/scheduler/spec"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/transfer"
)

// An import holds a schedule line to the bounds POST …/schedules holds a
// definition to (docs/background.md#schedules): a document made by a
// server that stored a 100 KB cron list, or a turn of megabytes, is
// refused at that line, and nothing of it is written.
func TestImportHoldsSchedulesToTheirBounds(t *testing.T) {
	st := storetest.Open(t)
	src, dst := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	next := time.Now().Add(time.Hour).UTC()
	for _, tc := range []struct {
		name string
		sc   store.Schedule
	}{
		{"a cron list of 100 KB", store.Schedule{Cron: "0" + strings.Repeat(",0", 50_000) + " 9 * * *"}},
		{"a field of 61 items", store.Schedule{Cron: strings.Repeat("0,", 60) + "1 9 * * *"}},
		{"a turn beyond its bound", store.Schedule{Every: time.Minute, Request: aap.TurnRequest{
			Messages: []aap.Message{aap.UserMessage(strings.Repeat("x", spec.MaxMessagesBytes))}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := storetest.NewConversation(t, st, src.ID, store.SessionCreateParams{}, aap.UserMessage("seed"))
			sc := tc.sc
			sc.TenantID, sc.SessionID, sc.ID, sc.NextRunAt = src.ID, c.ID, store.NewScheduleID(), &next
			if sc.Request.Messages == nil {
				sc.Request = aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("tick")}}
			}
			// Stored as an older server let it be: the store checks no
			// timing.
			if _, err := st.ScheduleCreate(context.Background(), store.ScheduleCreateParams{Schedule: sc}); err != nil {
				t.Fatal(err)
			}
			doc := string(export(t, st, src.ID, c.ID, transfer.WriteOptions{}))
			line := 0
			for i, l := range strings.Split(doc, "\n") {
				if strings.HasPrefix(l, `{"type":"schedule"`) {
					line = i + 1
				}
			}
			before := sessionsOf(t, st, dst.ID)
			_, err := transfer.ReadSession(context.Background(), strings.NewReader(doc), st, transfer.ReadOptions{TenantID: dst.ID, MaxLine: 1 << 20})
			var lerr *transfer.LineError
			if !errors.As(err, &lerr) || lerr.Line != line || lerr.Rule != transfer.RuleValue {
				t.Errorf("import: %v; want a LineError at line %d breaking %q", err, line, transfer.RuleValue)
			}
			if after := sessionsOf(t, st, dst.ID); after != before {
				t.Errorf("a refused import left %d sessions", after-before)
			}
		})
	}
}
