package aapclient

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	runningTurn   = `{"turnId":"t1","sessionId":"s1","status":"running"}`
	completedTurn = `{"turnId":"t1","sessionId":"s1","status":"completed","stopReason":"end_turn"}`
)

// preferWait is the N of a request's Prefer: wait=N, or -1.
func preferWait(t *testing.T, req *http.Request) int {
	t.Helper()
	v, ok := strings.CutPrefix(req.Header.Get("Prefer"), "wait=")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("Prefer: %q", req.Header.Get("Prefer"))
	}
	return n
}

// WaitTurn asks for the record with Prefer: wait=TurnWait and asks again
// while the server, honouring it, answers with the turn still running.
func TestWaitTurnAsksAgainWhileTheTurnRuns(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		answer(http.StatusOK, runningTurn, "Content-Type", "application/json", "Preference-Applied", "wait=30"),
		answer(http.StatusOK, completedTurn, "Content-Type", "application/json", "Preference-Applied", "wait=30"),
	}}
	c, _ := fakeClient(t, f)
	info, err := c.WaitTurn(context.Background(), "s1", "t1")
	if err != nil || info.Status != TurnCompleted {
		t.Fatalf("WaitTurn = %+v, %v", info, err)
	}
	if len(f.sent) != 2 {
		t.Fatalf("%d requests, want 2", len(f.sent))
	}
	for i, req := range f.sent {
		if req.Method != http.MethodGet || req.URL.Path != "/v1/sessions/s1/turns/t1" || preferWait(t, req) != int(TurnWait/time.Second) {
			t.Errorf("request %d: %s %s, Prefer %q", i+1, req.Method, req.URL.Path, req.Header.Get("Prefer"))
		}
	}
}

// A context that ends before TurnWait asks for a wait that ends a second
// before it does, so the server answers in time; never less than a second.
func TestWaitTurnAsksForNoLongerWaitThanItsContextLeaves(t *testing.T) {
	for _, tc := range []struct {
		left     time.Duration
		min, max int
	}{
		{left: 10 * time.Second, min: 8, max: 9},
		{left: 500 * time.Millisecond, min: 1, max: 1},
		{left: time.Hour, min: 30, max: 30},
	} {
		f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
			answer(http.StatusOK, completedTurn, "Content-Type", "application/json", "Preference-Applied", "wait=1"),
		}}
		c, _ := fakeClient(t, f)
		ctx, cancel := context.WithTimeout(context.Background(), tc.left)
		info, err := c.WaitTurn(ctx, "s1", "t1")
		cancel()
		if err != nil || info.Status != TurnCompleted {
			t.Fatalf("%s left: WaitTurn = %+v, %v", tc.left, info, err)
		}
		if n := preferWait(t, f.sent[0]); n < tc.min || n > tc.max {
			t.Errorf("%s left: Prefer %q, want wait= between %d and %d", tc.left, f.sent[0].Header.Get("Prefer"), tc.min, tc.max)
		}
	}
}

// A server that does not honour Prefer: wait (no Preference-Applied) has
// the turn's events followed to turn_stop, then the record read.
func TestWaitTurnFollowsTheEventsOfAServerThatDoesNotWait(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		answer(http.StatusOK, runningTurn, "Content-Type", "application/json"),
		answer(http.StatusOK, "id: 1\nevent: turn_start\ndata: {}\n\nid: 2\nevent: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n",
			"Content-Type", "text/event-stream"),
		answer(http.StatusOK, completedTurn, "Content-Type", "application/json"),
	}}
	c, _ := fakeClient(t, f)
	info, err := c.WaitTurn(context.Background(), "s1", "t1")
	if err != nil || info.Status != TurnCompleted {
		t.Fatalf("WaitTurn = %+v, %v", info, err)
	}
	var got []string
	for _, req := range f.sent {
		got = append(got, req.Method+" "+req.URL.Path)
	}
	want := []string{"GET /v1/sessions/s1/turns/t1", "GET /v1/sessions/s1/turns/t1/events", "GET /v1/sessions/s1/turns/t1"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("requests %q, want %q", got, want)
	}
}
