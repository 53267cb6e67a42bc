package aapclient

import (
	"context"
	"net/http"
	"testing"
)

// ListOptions.Owner is aapd's ?owner= of GET /sessions, and the owner of
// each record is read; the turn lists refuse it without sending anything.
func TestListSessionsOfOneOwner(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		answer(200, `{"sessions":[{"sessionId":"sess_2","agent":{"name":"echo"},"owner":"user 1"}],"next":"c2"}`, "Content-Type", "application/json"),
		answer(200, `{"sessionId":"sess_3","agent":{"name":"echo"}}`, "Content-Type", "application/json"),
	}}
	c, _ := fakeClient(t, f)
	ctx := context.Background()
	page, err := c.ListSessions(ctx, ListOptions{Owner: "user 1", Limit: 1, After: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sent[0].URL.RawQuery; got != "after=c1&limit=1&owner=user+1" {
		t.Errorf("query %q", got)
	}
	if len(page.Sessions) != 1 || page.Sessions[0].SessionID != "sess_2" || page.Sessions[0].Agent.Name != "echo" ||
		page.Sessions[0].Owner != "user 1" || page.Next != "c2" {
		t.Errorf("page %+v", page)
	}
	s, err := c.GetSession(ctx, "sess_3")
	if err != nil || s.SessionID != "sess_3" || s.Owner != "" {
		t.Errorf("session %+v, %v", s, err)
	}
	if _, err := c.ListTurns(ctx, "sess_3", ListOptions{Owner: "user 1"}); err == nil {
		t.Error("ListTurns with an owner: no error")
	}
	if len(f.sent) != 2 {
		t.Errorf("%d requests sent, want 2", len(f.sent))
	}
}
