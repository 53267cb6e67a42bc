package agents

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// The session event log: every event of every turn of a session, in
// order, each named by an opaque cursor (docs/protocols.md). It reads the
// same recorded events the per-turn streams read (turn_event_batches while
// a turn runs, its folded log once it has ended), so an event has the same
// place in both.

// SessionEvent is one event of a session's log.
type SessionEvent struct {
	// ID is the event's cursor: pass it as after (or Last-Event-ID) to read
	// what follows it.
	ID     string
	TurnID string
	// Seq is the event's id in its turn's stream (1 is turn_start).
	Seq   int
	Event aap.Event
}

// SessionLogParams reads a session's log after a cursor.
type SessionLogParams struct {
	TenantID  string
	Owner     string
	SessionID string
	// After is the cursor of the last event the client has; "" for the
	// start of the log.
	After string
	Limit int
}

// SessionLogPage is a page of a session's log.
type SessionLogPage struct {
	Events []SessionEvent
	// Next is where the next page starts: the cursor of the page's last
	// event, or the one asked for when the page is empty ("" when the log
	// has no event yet).
	Next string
	// HasMore is true when the log already holds events after the page.
	HasMore bool

	// running is the turn the page ended in, while it runs (the position
	// after the page is in it).
	running string
}

// ErrBadSessionCursor: a session log cursor this server did not issue for
// the session. It is a store.ErrBadCursor.
var ErrBadSessionCursor = fmt.Errorf("not a cursor of this session's event log: %w", store.ErrBadCursor)

// logPos is a position in a session's log: after event seq of turn.
type logPos struct {
	turn string
	seq  int
}

func (p logPos) cursor() string {
	if p.turn == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(p.turn + "." + strconv.Itoa(p.seq)))
}

func parseCursor(c string) (logPos, error) {
	if c == "" {
		return logPos{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return logPos{}, ErrBadSessionCursor
	}
	turn, seq, ok := strings.Cut(string(b), ".")
	n, err := strconv.Atoi(seq)
	if !ok || err != nil || n < 0 || !store.ValidID("turn_", turn) {
		return logPos{}, ErrBadSessionCursor
	}
	return logPos{turn: turn, seq: n}, nil
}

// SessionEvents reads a page of a session's event log after p.After:
// store.ErrNotFound for an unknown session (or another's),
// ErrBadSessionCursor for a cursor that is not one of the session's, and
// ErrBeyondLog for one past the end of its turn's log (no client can have
// been sent it).
func (r *Runner) SessionEvents(ctx context.Context, p SessionLogParams) (SessionLogPage, error) {
	pos, err := parseCursor(p.After)
	if err != nil {
		return SessionLogPage{}, err
	}
	turns, err := r.store.SessionLog(ctx, store.SessionLogParams{
		TenantID: p.TenantID, Owner: p.Owner, SessionID: p.SessionID, After: pos.turn, Turns: p.Limit + 1})
	if errors.Is(err, store.ErrBadCursor) {
		return SessionLogPage{}, ErrBadSessionCursor
	}
	if err != nil {
		return SessionLogPage{}, err
	}
	page := SessionLogPage{Events: []SessionEvent{}, Next: pos.cursor()}
	for i, t := range turns {
		events := t.Events
		// A running turn's log starts with turn_start before anything is
		// recorded: its process sends it at once.
		if !t.Finished && len(events) == 0 {
			events = []aap.Event{aap.TurnStart()}
		}
		from := 0
		if i == 0 && pos.turn != "" {
			if pos.seq > len(events) {
				return SessionLogPage{}, fmt.Errorf("%w: event %d of turn %s, whose log has %d so far", ErrBeyondLog, pos.seq, t.TurnID, len(events))
			}
			from = pos.seq
		}
		for j := from; j < len(events); j++ {
			if len(page.Events) == p.Limit {
				page.HasMore = true
				return page, nil
			}
			e := events[j]
			if e.Type == aap.EventTurnStart {
				e.TurnID = t.TurnID
			}
			at := logPos{turn: t.TurnID, seq: j + 1}
			page.Events = append(page.Events, SessionEvent{ID: at.cursor(), TurnID: t.TurnID, Seq: j + 1, Event: e})
			page.Next = at.cursor()
		}
		if !t.Finished {
			page.running = t.TurnID
			if len(page.Events) == 0 || page.Events[len(page.Events)-1].TurnID != t.TurnID {
				page.Next = logPos{turn: t.TurnID, seq: 0}.cursor()
			}
			return page, nil
		}
	}
	return page, nil
}

// sessionLogPoll is how often a follower of a session's log looks for a
// turn started in another process (one started in this process wakes it
// at once).
const sessionLogPoll = 250 * time.Millisecond

// SessionFollower reads a session's log live: what is recorded, then each
// turn as it runs (through Follow, from whichever process runs it), then
// the turns that come after, for as long as its reader reads.
type SessionFollower struct {
	runner *Runner
	p      SessionLogParams
	pos    logPos
	// live follows the running turn pos is in.
	live EventSource
}

// FollowSession returns a follower of a session's log after p.After.
func (r *Runner) FollowSession(p SessionLogParams) (*SessionFollower, error) {
	pos, err := parseCursor(p.After)
	if err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		p.Limit = 500
	}
	return &SessionFollower{runner: r, p: p, pos: pos}, nil
}

// Read returns the next events of the log, waiting until there is at least
// one. ErrTurnGone: the session was deleted while a turn ran;
// store.ErrNotFound: it was deleted between turns.
func (f *SessionFollower) Read(ctx context.Context) ([]SessionEvent, error) {
	for {
		if f.live != nil {
			events, done, err := f.live.Read(ctx, f.pos.seq)
			if err != nil {
				return nil, err
			}
			if done {
				f.live = nil
			}
			if len(events) > 0 {
				out := make([]SessionEvent, len(events))
				for i, e := range events {
					f.pos.seq++
					if e.Type == aap.EventTurnStart {
						e.TurnID = f.pos.turn
					}
					out[i] = SessionEvent{ID: f.pos.cursor(), TurnID: f.pos.turn, Seq: f.pos.seq, Event: e}
				}
				return out, nil
			}
			continue
		}
		// Woken by a turn started here, or by the poll for one elsewhere.
		wake := f.runner.sessionWake(f.p.TenantID, f.p.SessionID)
		p := f.p
		p.After = f.pos.cursor()
		page, err := f.runner.SessionEvents(ctx, p)
		if err != nil {
			return nil, err
		}
		if page.running != "" {
			// The rest of the running turn comes from its stream, live.
			if n := len(page.Events); n > 0 && page.Events[n-1].TurnID == page.running {
				f.pos = logPos{turn: page.running, seq: page.Events[n-1].Seq}
			} else {
				f.pos = logPos{turn: page.running}
			}
			f.live = f.runner.Follow(store.TurnRef{TenantID: f.p.TenantID, SessionID: f.p.SessionID, TurnID: page.running})
			// The live stream gives what follows f.pos: drop what the page
			// gave of the running turn past it (nothing, by construction).
		} else if n := len(page.Events); n > 0 {
			last := page.Events[n-1]
			f.pos = logPos{turn: last.TurnID, seq: last.Seq}
		}
		if len(page.Events) > 0 {
			return page.Events, nil
		}
		if f.live != nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-time.After(sessionLogPoll):
		}
	}
}

// maxSessionWakes bounds the wake channels a process keeps: past it, all
// are closed at once (their followers wake, find nothing new, and wait
// again), so sessions followed once and never again do not add up.
const maxSessionWakes = 10000

// sessionWakes wakes the followers of a session's log in this process when
// a turn starts on it here.
type sessionWakes struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// sessionWake returns a channel closed when a turn next starts on the
// session in this process.
func (r *Runner) sessionWake(tenantID, sessionID string) <-chan struct{} {
	w := &r.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	key := cacheKey(tenantID, sessionID)
	if ch, ok := w.m[key]; ok {
		return ch
	}
	if w.m == nil || len(w.m) >= maxSessionWakes {
		for _, ch := range w.m {
			close(ch)
		}
		w.m = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	w.m[key] = ch
	return ch
}

// wakeSession wakes the followers of a session's log in this process.
func (r *Runner) wakeSession(tenantID, sessionID string) {
	w := &r.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	key := cacheKey(tenantID, sessionID)
	if ch, ok := w.m[key]; ok {
		close(ch)
		delete(w.m, key)
	}
}

// Gone is the last event of a log whose session was deleted while a turn
// ran (Read returned ErrTurnGone): that turn's turn_stop, with the next id
// of its stream, as the per-turn streams end it.
func (f *SessionFollower) Gone(why aap.TurnError) SessionEvent {
	at := logPos{turn: f.pos.turn, seq: f.pos.seq + 1}
	return SessionEvent{ID: at.cursor(), TurnID: at.turn, Seq: at.seq, Event: aap.TurnStopError(why)}
}
