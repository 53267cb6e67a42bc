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

	// end is the position after the page; running tells that it is in a
	// turn still running.
	end     logPos
	running bool
}

// ErrBadSessionCursor: a session log cursor this server did not issue for
// the session. It is a store.ErrBadCursor.
var ErrBadSessionCursor = fmt.Errorf("not a cursor of this session's event log: %w", store.ErrBadCursor)

// logPos is a position in a session's log: after event seq of turn.
type logPos struct {
	turn string
	seq  int
	// before is what precedes turn in the log: the id of the turn before
	// it, or the session's id when turn is the session's first; "" when
	// unknown (a cursor of an earlier release). It lets a cursor outlive
	// its turn: a turn a database crash took (ErrTurnLost) leaves the log,
	// and a resume from one of its events goes on after what preceded it.
	before string
}

func (p logPos) cursor() string {
	if p.turn == "" {
		return ""
	}
	c := p.turn + "." + strconv.Itoa(p.seq)
	if p.before != "" {
		c += "." + p.before
	}
	return base64.RawURLEncoding.EncodeToString([]byte(c))
}

func parseCursor(c string) (logPos, error) {
	if c == "" {
		return logPos{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return logPos{}, ErrBadSessionCursor
	}
	turn, rest, ok := strings.Cut(string(b), ".")
	seq, before, anchored := strings.Cut(rest, ".")
	n, err := strconv.Atoi(seq)
	if !ok || err != nil || n < 0 || !store.ValidID("turn_", turn) ||
		anchored && !store.ValidID("turn_", before) && !store.ValidID("sess_", before) {
		return logPos{}, ErrBadSessionCursor
	}
	return logPos{turn: turn, seq: n, before: before}, nil
}

// firstLogTurns is how many turns a read of the session log asks for
// first; each further read of the same page asks twice as many.
const firstLogTurns = 8

// SessionEvents reads a page of a session's event log after p.After:
// store.ErrNotFound for an unknown session (or another's),
// ErrBadSessionCursor for a cursor that is not one of the session's, and
// ErrBeyondLog for one past the end of its turn's log (no client can have
// been sent it). A cursor of a turn that is no longer in the log — a
// database crash took it before it ended (ErrTurnLost) — reads on after
// what preceded that turn, so the log goes on without it.
//
// The turns are read a few at a time, then twice as many as before, up to
// one per event the page has room for: a page of limit events needs at most
// limit turns, but turns usually hold many events, and a read of limit
// turns would decode many times what the page returns.
func (r *Runner) SessionEvents(ctx context.Context, p SessionLogParams) (SessionLogPage, error) {
	pos, err := parseCursor(p.After)
	if err != nil {
		return SessionLogPage{}, err
	}
	batch := min(p.Limit+1, firstLogTurns)
	read := func(after string) ([]store.SessionLogTurn, error) {
		return r.store.SessionLog(ctx, store.SessionLogParams{
			TenantID: p.TenantID, Owner: p.Owner, SessionID: p.SessionID, After: after, Turns: batch})
	}
	// From the log's start, or from the cursor's turn, after the events
	// of it the client has (checked against its log); -1 skips them all.
	skip, check, before := 0, false, p.SessionID
	if pos.turn != "" {
		skip, check, before = pos.seq, true, pos.before
	}
	turns, err := read(pos.turn)
	if errors.Is(err, store.ErrBadCursor) {
		switch {
		case pos.before == p.SessionID:
			turns, err = read("")
			skip, check, before = 0, false, p.SessionID
		case store.ValidID("turn_", pos.before):
			turns, err = read(pos.before)
			skip, check, before = -1, false, ""
		}
	}
	if errors.Is(err, store.ErrBadCursor) {
		return SessionLogPage{}, ErrBadSessionCursor
	}
	if err != nil {
		return SessionLogPage{}, err
	}
	page := SessionLogPage{Events: []SessionEvent{}, Next: p.After, end: pos}
	for again := false; ; again = true {
		for i, t := range turns {
			if again && i == 0 {
				continue // the last turn of the read before, read again
			}
			events := t.Events
			// A running turn's log starts with turn_start before anything is
			// recorded: its process sends it at once.
			if !t.Finished && len(events) == 0 {
				events = []aap.Event{aap.TurnStart()}
			}
			from := 0
			switch {
			case i > 0:
				before = turns[i-1].TurnID
			case t.Trimmed:
				// Its log was dropped with the trimmed full history: a
				// cursor inside it reads on after it.
			case check && skip > len(events):
				return SessionLogPage{}, fmt.Errorf("%w: event %d of turn %s, whose log has %d so far", ErrBeyondLog, skip, t.TurnID, len(events))
			case skip < 0:
				from = len(events)
			default:
				from = skip
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
				at := logPos{turn: t.TurnID, seq: j + 1, before: before}
				page.Events = append(page.Events, SessionEvent{ID: at.cursor(), TurnID: t.TurnID, Seq: j + 1, Event: e})
				page.Next, page.end = at.cursor(), at
			}
			if !t.Finished {
				// The page ends in the running turn: where in it is page.end
				// (the cursor's own position when the client had all of it).
				page.running = true
				return page, nil
			}
		}
		if len(turns) < batch {
			return page, nil // the log holds no more turns
		}
		// The page has room, and the log may hold more turns: read on from
		// the last one read (which the read includes again).
		batch = min(2*batch, p.Limit+1) + 1
		if turns, err = read(turns[len(turns)-1].TurnID); err != nil {
			return SessionLogPage{}, err
		}
	}
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
		f.pos = page.end
		if page.running {
			// The rest of the running turn comes from its stream, live,
			// after what the page gave of it.
			f.live = f.runner.Follow(store.TurnRef{TenantID: f.p.TenantID, SessionID: f.p.SessionID, TurnID: f.pos.turn})
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

// Gone is the event that ends the running turn when Read failed with
// ErrTurnGone (the session was deleted: the log ends with it) or
// ErrTurnLost (a database crash took the turn: the log goes on without
// it, Read reading on after what preceded the turn): that turn's
// turn_stop, with the next id of its stream, as the per-turn streams end
// it.
func (f *SessionFollower) Gone(why aap.TurnError) SessionEvent {
	f.live = nil
	f.pos.seq++
	return SessionEvent{ID: f.pos.cursor(), TurnID: f.pos.turn, Seq: f.pos.seq, Event: aap.TurnStopError(why)}
}
