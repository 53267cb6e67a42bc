package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// sayLogged runs a turn of a user message answered with a text whose event
// log repeats the answer (as a turn streamed in delta mode records it).
func sayLogged(t *testing.T, c *storetest.Conversation, user, answer string) string {
	t.Helper()
	ctx := context.Background()
	begun, err := c.Store.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: c.TenantID, SessionID: c.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(user), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := begun.Turn.Ref()
	if _, err := c.Store.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 1, FirstSeq: begun.LastSeq + 1,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.TextBlock(answer)), Origin: store.OriginAgent}},
		Status:   store.TurnCompleted, StopReason: aap.StopEndTurn, InputTokens: 10, OutputTokens: 5,
		Events: []aap.Event{aap.TurnStart(), {Type: aap.EventTextDelta, Delta: answer}, aap.TurnStop(aap.StopEndTurn)}}); err != nil {
		t.Fatal(err)
	}
	c.LastSeq = begun.LastSeq + 1
	return ref.TurnID
}

// A trim drops the event logs of the ended turns its prefix covers whole
// (in batches, as it drops their messages): no row keeps their text,
// reading one gives a log of turn_start and
// its turn_stop alone (Trimmed), the session's log skips them, and the
// turns after the prefix read as they were.
func TestTrimDropsTheEventLogsOfTrimmedTurns(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	other := storetest.NewTenant(t, st)
	ctx := context.Background()
	url := storetest.URL(t)
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	var turns []string
	for i := 1; i <= 5; i++ { // seqs 2i-1, 2i
		turns = append(turns, sayLogged(t, c, fmt.Sprintf("q%d", i), fmt.Sprintf("secret-answer-%d", i)))
	}
	// Another tenant's session with the same texts is not touched.
	oc := storetest.NewConversation(t, st, other.ID, store.SessionCreateParams{})
	otherTurn := sayLogged(t, oc, "q1", "secret-answer-1")
	sayLogged(t, oc, "q2", "secret-answer-2")
	oc.Compact(4)
	c.Compact(6)
	storetest.Exec(t, url, `UPDATE messages SET created_at = now() - interval '40 days' WHERE tenant_id IN ($1, $2)`, tn.ID, other.ID)
	// In batches of 2 messages: turn by turn.
	var dropped int64
	for range 10 {
		tr, err := st.SessionTrimHistory(ctx, tn.ID, c.ID, time.Now().Add(-30*day), 2)
		if err != nil {
			t.Fatal(err)
		}
		dropped += tr.Turns
		if !tr.More {
			if tr.Through != 6 {
				t.Fatalf("trimmed through %d, want 6", tr.Through)
			}
			break
		}
	}
	if dropped != 3 {
		t.Errorf("%d turns' logs dropped, want 3", dropped)
	}
	for i := 1; i <= 5; i++ {
		var n int
		storetest.Scan(t, url, `SELECT count(*) FROM turns WHERE tenant_id = $1 AND session_id = $2 AND events::text LIKE $3`,
			[]any{tn.ID, c.ID, fmt.Sprintf("%%secret-answer-%d%%", i)}, &n)
		storetest.Scan(t, url, `SELECT $1::int + count(*) FROM turn_event_batches WHERE tenant_id = $2 AND session_id = $3 AND events::text LIKE $4`,
			[]any{n, tn.ID, c.ID, fmt.Sprintf("%%secret-answer-%d%%", i)}, &n)
		if want := map[bool]int{true: 0, false: 1}[i <= 3]; n != want {
			t.Errorf("answer %d is in %d rows of the event log, want %d", i, n, want)
		}
	}
	for i, id := range turns {
		log, err := st.TurnEventsAfter(ctx, store.TurnRef{TenantID: tn.ID, SessionID: c.ID, TurnID: id}, 0)
		switch {
		case i < 3 && (err != nil || !log.Trimmed || !log.Finished || len(log.Events) != 2 ||
			log.Events[0].Type != aap.EventTurnStart || log.Events[1].Type != aap.EventTurnStop || log.Events[1].StopReason != aap.StopEndTurn):
			t.Errorf("turn %d's events: %+v, %v; want trimmed, turn_start and its turn_stop alone", i+1, log, err)
		case i >= 3 && (err != nil || len(log.Events) != 3 || log.Events[1].Delta != fmt.Sprintf("secret-answer-%d", i+1) || !log.Finished):
			t.Errorf("turn %d's events: %+v, %v; want its 3, whole", i+1, log, err)
		}
	}
	slog, err := st.SessionLog(ctx, store.SessionLogParams{TenantID: tn.ID, SessionID: c.ID, Turns: 10})
	if err != nil || len(slog) != 5 {
		t.Fatalf("session log: %+v, %v; want 5 turns", slog, err)
	}
	for i, lt := range slog {
		if lt.Trimmed != (i < 3) || !lt.Finished || (i < 3) != (len(lt.Events) == 0) {
			t.Errorf("session log's turn %d: %+v; want trimmed %v", i+1, lt, i < 3)
		}
	}
	if log, err := st.TurnEventsAfter(ctx, store.TurnRef{TenantID: other.ID, SessionID: oc.ID, TurnID: otherTurn}, 0); err != nil || len(log.Events) != 3 {
		t.Errorf("the other tenant's turn: %+v, %v; want its 3 events", log, err)
	}
}
