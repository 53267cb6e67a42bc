package aapclient_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
)

// A stream whose connection drops mid-event, and whose first resume drops
// too, still yields every event of the turn once, in order: the client
// resumes from the last whole event it read with Last-Event-ID.
func TestStreamResumesAfterDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startServer(t)
	// turn_start is ~40 bytes and each delta ~55: the cuts fall inside
	// events, after a few whole ones.
	rec := newRecorder(170, 140)
	c := srv.client(t, aapclient.WithHTTPClient(&http.Client{Transport: rec}))
	sid := echoSession(t, c)

	s, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamDelta, "/slow 10\n/words 40"))
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, s)
	checkFrame(t, events, aap.StopEndTurn)
	if s.Resumes() != 2 {
		t.Errorf("%d resumes, want 2 (one per cut)", s.Resumes())
	}
	// Ids run from 1 without a gap: as many events as the last id says.
	if s.LastEventID() != len(events) {
		t.Errorf("last event id %d, but %d events read", s.LastEventID(), len(events))
	}
	want := "Echo: " + words(40)
	if got := text(events); got != want {
		t.Fatalf("text after two drops\n got %q\nwant %q", got, want)
	}

	// The resumes asked for the events after the last whole one read.
	var resumedAt []int
	for _, r := range rec.requests() {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/turns/"+s.TurnID()+"/events") {
			n, err := strconv.Atoi(r.LastEventID)
			if err != nil {
				t.Fatalf("resume with Last-Event-ID %q", r.LastEventID)
			}
			resumedAt = append(resumedAt, n)
		}
	}
	if len(resumedAt) != 2 || resumedAt[0] < 1 || resumedAt[1] <= resumedAt[0] {
		t.Errorf("resumed after events %v, want two growing ids", resumedAt)
	}

	// The whole turn, replayed from the server's log, is what was read.
	replay, err := c.TurnEvents(ctx, sid, s.TurnID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := render(collect(t, replay)), render(events); got != want {
		t.Errorf("replayed turn differs from the resumed stream\nreplay:\n%s\nresumed:\n%s", got, want)
	}
	// After the last event there is nothing (204): the stream is empty.
	rest, err := c.TurnEvents(ctx, sid, s.TurnID(), len(events))
	if err != nil {
		t.Fatal(err)
	}
	if more := collect(t, rest); len(more) != 0 {
		t.Errorf("events after turn_stop: %s", render(more))
	}
}

func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = "word" + strconv.Itoa(i+1)
	}
	return strings.Join(w, " ")
}

// A turn sent while another runs on the session is refused with 409 and
// Retry-After; the client waits and sends it again with the same
// Idempotency-Key until the session is free.
func TestBusySessionRetriedWithSameKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := newRecorder()
	c := startServer(t).client(t, aapclient.WithHTTPClient(&http.Client{Transport: rec}),
		aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 20}))
	sid := echoSession(t, c)

	first, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamDelta, "/slow 100\n/words 15"))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// Once turn_start is read the first turn holds the session.
	for e, err := range first.Events() {
		if err != nil || e.Type != aap.EventTurnStart {
			t.Fatalf("first event %v, %v", e.Type, err)
		}
		break
	}

	res, err := c.SendTurn(ctx, sid, userTurn("", "second"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].Content.PlainText() != "Echo: second" {
		t.Fatalf("second turn %+v", res.TurnResponse)
	}
	var tries []sentRequest
	for _, r := range rec.requests() {
		if r.Method == http.MethodPost && r.IdempotencyKey != "" && r.Path == "/sessions/"+sid+"/turns" && r.Status != 0 {
			tries = append(tries, r)
		}
	}
	// tries[0] is the first turn.
	tries = tries[1:]
	if len(tries) < 2 || tries[0].Status != http.StatusConflict || tries[len(tries)-1].Status != http.StatusOK {
		t.Fatalf("second turn's attempts %+v, want 409s then a 200", tries)
	}
	for _, r := range tries {
		if r.IdempotencyKey != tries[0].IdempotencyKey {
			t.Fatalf("attempts sent different keys: %+v", tries)
		}
	}
}

// Without retries, the 409 comes back as an error naming the running turn.
func TestBusySessionError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t, aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}))
	sid := echoSession(t, c)
	first, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamDelta, "/slow 50\n/words 10"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendTurn(ctx, sid, userTurn("", "second"))
	e := apiError(t, err, http.StatusConflict)
	if e.TurnID != first.TurnID() || e.RetryAfter != time.Second || !e.Temporary() || !strings.HasSuffix(e.Type, "/turn-running") {
		t.Errorf("409 %+v (running turn %s)", e, first.TurnID())
	}
	checkFrame(t, collect(t, first), aap.StopEndTurn)
}

// Cancelling the context ends a stream at once with the context's error,
// without resuming it; the turn goes on on the server.
func TestStreamContextCancel(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	c := startServer(t).client(t, aapclient.WithHTTPClient(&http.Client{Transport: rec}))
	sid := echoSession(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamDelta, "/slow 50\n/words 40"))
	if err != nil {
		t.Fatal(err)
	}
	var got error
	n := 0
	for _, err := range s.Events() {
		if err != nil {
			got = err
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	if !errors.Is(got, context.Canceled) {
		t.Fatalf("after cancel: %v, want context.Canceled", got)
	}
	for _, r := range rec.requests() {
		if strings.HasSuffix(r.Path, "/events") {
			t.Errorf("a cancelled stream was resumed: %+v", r)
		}
	}
	// The turn finishes by itself: a new context follows it to its end.
	follow, err := c.TurnEvents(context.Background(), sid, s.TurnID(), s.LastEventID())
	if err != nil {
		t.Fatal(err)
	}
	if events := collect(t, follow); len(events) == 0 || events[len(events)-1].StopReason != aap.StopEndTurn {
		t.Errorf("rest of the turn:\n%s", render(events))
	}

	// A call on a cancelled context fails at once.
	if _, err := c.Meta(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Meta on a cancelled context: %v", err)
	}
}
