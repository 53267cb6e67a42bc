package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
)

// page is one GET /sessions response, with whether "next" was present at all.
type page struct {
	ids     []string
	next    string
	hasNext bool
}

// listPage gets one page of sessions through aapclient. (The OpenAPI check
// holds the body to the document: sessions an array, never null.
// decodePage checks the members' presence on the wire.)
func (c *client) listPage(t *testing.T, opts aapclient.ListOptions) page {
	t.Helper()
	list := c.as(t).listSessions(opts)
	p := page{next: list.Next, hasNext: list.Next != ""}
	for _, s := range list.Sessions {
		p.ids = append(p.ids, s.SessionID)
	}
	return p
}

// decodePage reads a raw GET /sessions body, telling an absent "next" from
// an empty one.
func decodePage(t *testing.T, body []byte) page {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("list body %s: %v", body, err)
	}
	var list aap.SessionList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("list body %s: %v", body, err)
	}
	if list.Sessions == nil {
		t.Errorf("sessions member is missing or null: %s", body)
	}
	p := page{next: list.Next}
	_, p.hasNext = raw["next"]
	if p.hasNext && list.Next == "" {
		t.Errorf("next is present but empty: %s", body)
	}
	for _, s := range list.Sessions {
		p.ids = append(p.ids, s.SessionID)
	}
	return p
}

// createSessions creates n echo sessions through the store, oldest first.
func createSessions(t *testing.T, s *testServer, tenantID string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		sess, _, err := s.Store.SessionCreate(t.Context(), store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = sess.ID
	}
	return ids
}

func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func TestListSessionsNewestFirst(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)

	t.Run("order and last page", func(t *testing.T) {
		t.Parallel()
		c := s.newTenant(t)
		var created []string
		for range 6 {
			created = append(created, c.echoSession(nil))
		}
		all := c.listPage(t, aapclient.ListOptions{})
		if !reflect.DeepEqual(all.ids, reversed(created)) {
			t.Errorf("list = %v, want newest first %v", all.ids, reversed(created))
		}
		if all.hasNext {
			t.Errorf("a list that fits one page has next %q", all.next)
		}
		// Pages of 3 over 6 sessions: the second page is full and the last.
		p1 := c.listPage(t, aapclient.ListOptions{Limit: 3})
		if !p1.hasNext || !reflect.DeepEqual(p1.ids, reversed(created)[:3]) {
			t.Fatalf("page 1 = %+v", p1)
		}
		// Raw: on the wire, a page with more after it has a non-empty next.
		if raw := decodePage(t, c.do("GET", "/sessions?limit=3", nil).expect(t, http.StatusOK).body); !reflect.DeepEqual(raw, p1) {
			t.Errorf("raw page 1 = %+v, through the client %+v", raw, p1)
		}
		p2 := c.listPage(t, aapclient.ListOptions{Limit: 3, After: p1.next})
		if p2.hasNext || !reflect.DeepEqual(p2.ids, reversed(created)[3:]) {
			t.Errorf("page 2 = %+v, want %v and no next", p2, reversed(created)[3:])
		}
		// A cursor stays valid: asking again gives the same page.
		if again := c.listPage(t, aapclient.ListOptions{Limit: 3, After: p1.next}); !reflect.DeepEqual(again, p2) {
			t.Errorf("the same cursor gave %+v, then %+v", p2, again)
		}
		// Newest first is descending session id order (ids are time-ordered).
		if !slices.IsSortedFunc(all.ids, func(a, b string) int { return -cmpString(a, b) }) {
			t.Errorf("ids are not descending: %v", all.ids)
		}
		// The newest session after a delete and a create.
		c.deleteSession(created[5])
		newest := c.echoSession(nil)
		if got := c.listPage(t, aapclient.ListOptions{Limit: 2}); !reflect.DeepEqual(got.ids, []string{newest, created[4]}) {
			t.Errorf("after delete+create: %v", got.ids)
		}
	})

	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		c := s.newTenant(t)
		// Raw: the exact body of an empty list.
		r := c.do("GET", "/sessions", nil).expect(t, http.StatusOK)
		if got := string(bytes.TrimSpace(r.body)); got != `{"sessions":[]}` {
			t.Errorf("empty list = %s", got)
		}
	})

	t.Run("default and maximum limits", func(t *testing.T) {
		t.Parallel()
		if v3.DefaultPageLimit != 20 || v3.MaxPageLimit != 100 {
			t.Fatalf("documented limits changed: default %d, max %d", v3.DefaultPageLimit, v3.MaxPageLimit)
		}
		c, tn := s.newTenantWithID(t)
		total := v3.MaxPageLimit + 5
		want := reversed(createSessions(t, s, tn.ID, total))

		def := c.listPage(t, aapclient.ListOptions{})
		if len(def.ids) != v3.DefaultPageLimit || !def.hasNext {
			t.Errorf("default page: %d sessions, next %v; want %d and next", len(def.ids), def.hasNext, v3.DefaultPageLimit)
		}
		if !reflect.DeepEqual(def.ids, want[:len(def.ids)]) {
			t.Errorf("default page is not the newest sessions")
		}
		full := c.listPage(t, aapclient.ListOptions{Limit: v3.MaxPageLimit})
		if len(full.ids) != v3.MaxPageLimit || !full.hasNext || !reflect.DeepEqual(full.ids, want[:v3.MaxPageLimit]) {
			t.Errorf("max page: %d sessions, next %v", len(full.ids), full.hasNext)
		}
		rest := c.listPage(t, aapclient.ListOptions{Limit: v3.MaxPageLimit, After: full.next})
		if rest.hasNext || !reflect.DeepEqual(rest.ids, want[v3.MaxPageLimit:]) {
			t.Errorf("last page: %+v, want %v and no next", rest, want[v3.MaxPageLimit:])
		}
		// The default limit also applies to later pages.
		p2 := c.listPage(t, aapclient.ListOptions{After: def.next})
		if !reflect.DeepEqual(p2.ids, want[v3.DefaultPageLimit:2*v3.DefaultPageLimit]) {
			t.Errorf("second default page = %d sessions", len(p2.ids))
		}
		_, err := c.api().ListSessions(t.Context(), aapclient.ListOptions{Limit: v3.MaxPageLimit + 1})
		refusal(t, err, http.StatusBadRequest, "invalid-request")
		one := c.listPage(t, aapclient.ListOptions{Limit: 1})
		if len(one.ids) != 1 || one.ids[0] != want[0] || !one.hasNext {
			t.Errorf("limit=1: %+v", one)
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// churn tracks the sessions a test creates and deletes behind a lister's
// back.
type churn struct {
	mu       sync.Mutex
	created  map[string]bool // by anyone during the test
	deleting map[string]bool // a DELETE was sent (it may still be in flight)
	deleted  map[string]bool // a DELETE returned 204
	errs     []string
}

func (ch *churn) fail(format string, args ...any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.errs = append(ch.errs, fmt.Sprintf(format, args...))
}

// deletedNow returns the sessions whose deletion has completed.
func (ch *churn) deletedNow() map[string]bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	out := make(map[string]bool, len(ch.deleted))
	for id := range ch.deleted {
		out[id] = true
	}
	return out
}

// create makes a session. Like remove, it is called from goroutines: it
// records errors instead of failing the test.
func (ch *churn) create(api *aapclient.Client) string {
	out, err := api.CreateSession(context.Background(), aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}})
	if err != nil {
		ch.fail("create: %v", err)
		return ""
	}
	ch.mu.Lock()
	ch.created[out.SessionID] = true
	ch.mu.Unlock()
	return out.SessionID
}

// remove deletes a session unless someone already did.
func (ch *churn) remove(api *aapclient.Client, id string) {
	ch.mu.Lock()
	if ch.deleting[id] {
		ch.mu.Unlock()
		return
	}
	ch.deleting[id] = true
	ch.mu.Unlock()
	if err := api.DeleteSession(context.Background(), id); err != nil {
		ch.fail("delete %s: %v", id, err)
		return
	}
	ch.mu.Lock()
	ch.deleted[id] = true
	ch.mu.Unlock()
}

func TestListSessionsPaginationUnderConcurrentCreateAndDelete(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c, tn := s.newTenantWithID(t)
	initial := createSessions(t, s, tn.ID, 60)
	isInitial := map[string]bool{}
	for _, id := range initial {
		isInitial[id] = true
	}
	ch := &churn{created: map[string]bool{}, deleting: map[string]bool{}, deleted: map[string]bool{}}
	api := c.api()

	// Goroutines create and delete while the listing goes on: new sessions,
	// initial ones not yet listed, and each other's.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			var mine []string
			for i := 0; i < 40; i++ {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
				switch rng.IntN(8) {
				case 0, 1, 2:
					if id := ch.create(api); id != "" {
						mine = append(mine, id)
					}
				case 3:
					ch.remove(api, initial[rng.IntN(len(initial))])
				default:
					if len(mine) > 0 {
						ch.remove(api, mine[0])
						mine = mine[1:]
					}
				}
			}
		})
	}

	seen := map[string]int{}
	unknown := map[string]int{} // listed before its creator knew its id
	var order []string
	limits := []int{3, 1, 5, 2, 4}
	after := ""
	pages := 0
	for n := 0; ; n++ {
		pages++
		if n > 200 {
			t.Fatalf("listing does not end: %d pages", n)
		}
		goneBefore := ch.deletedNow()
		p := c.listPage(t, aapclient.ListOptions{Limit: limits[n%len(limits)], After: after})
		if len(p.ids) > limits[n%len(limits)] {
			t.Errorf("page %d has %d sessions, limit %d", n, len(p.ids), limits[n%len(limits)])
		}
		for _, id := range p.ids {
			if goneBefore[id] {
				t.Errorf("page %d lists %s, deleted before the page was asked for", n, id)
			}
			if !isInitial[id] && !ch.isCreated(id) {
				// Its creator may not have read the answer yet: judged
				// once the churn is over.
				unknown[id] = n
			}
			if len(order) > 0 && id >= order[len(order)-1] {
				t.Errorf("page %d: %s after %s: not strictly descending", n, id, order[len(order)-1])
			}
			seen[id]++
			order = append(order, id)
		}
		if !p.hasNext {
			break
		}
		if len(p.ids) == 0 {
			t.Fatalf("page %d is empty but has next", n)
		}
		after = p.next
		// Between pages: delete the oldest initial session not listed yet,
		// one already listed, and create one.
		for i := range initial {
			if id := initial[i]; seen[id] == 0 && !ch.isDeleting(id) {
				ch.remove(api, id)
				break
			}
		}
		ch.remove(api, p.ids[0])
		ch.create(api)
	}
	close(stop)
	wg.Wait()

	for id, n := range unknown {
		if !ch.isCreated(id) {
			t.Errorf("page %d lists %s, a session nobody created", n, id)
		}
	}
	for _, e := range ch.errs {
		t.Error(e)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s listed %d times", id, n)
		}
	}
	for _, id := range initial {
		if !ch.isDeleting(id) && seen[id] != 1 {
			t.Errorf("%s existed before listing began, was never deleted, and was listed %d times", id, seen[id])
		}
	}
	survivors := 0
	for _, id := range initial {
		if !ch.isDeleting(id) {
			survivors++
		}
	}
	if survivors == 0 || survivors == len(initial) {
		t.Logf("churn deleted %d of %d initial sessions: the test exercised little", len(initial)-survivors, len(initial))
	}
	t.Logf("%d pages listed %d sessions; %d initial sessions survived, %d created during listing", pages, len(order), survivors, len(ch.created))

	// Afterwards, with the churn over, the list is exactly what is left.
	want := map[string]bool{}
	for _, id := range initial {
		want[id] = true
	}
	for id := range ch.created {
		want[id] = true
	}
	for id := range ch.deleted {
		delete(want, id)
	}
	got := map[string]bool{}
	for s, err := range api.Sessions(t.Context(), aapclient.ListOptions{Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		got[s.SessionID] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("final list has %d sessions, want the %d left", len(got), len(want))
	}
}

func (ch *churn) isCreated(id string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.created[id]
}

func (ch *churn) isDeleting(id string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.deleting[id]
}

func (ch *churn) isDeleted(id string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.deleted[id]
}
