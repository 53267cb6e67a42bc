package sandboxagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// logPage is how many AAP events a read of the session log asks for at once.
const logPage = 500

// logReader reads a session's UniversalEvents: it reads the session's AAP
// event log (agents.Runner.SessionEvents, the log GET /sessions/:id/events
// serves; FollowSession to follow it live) and translates it, numbering
// the events from 1 (translate.go says why every read numbers them alike).
// It starts at a turn boundary found in the door's index, so a read after
// an offset translates the turn holding that offset and what follows, not
// the whole session.
type logReader struct {
	d    *Door
	sess store.Session
	name string // the session's id in this API
	raw  bool
	ix   *sessionIndex

	next   int64  // the sequence of the next event
	cursor string // the AAP log cursor of the last AAP event read
	// tr translates the turn being read, nil between turns; cur is where
	// that turn began.
	tr  *translator
	cur span
	// inputs holds the inputs of the turns of the events being read.
	inputs map[string]store.TurnInput
	// endSent is set once session.ended is produced: nothing follows it.
	endSent bool
	// started maps the turns the reader has begun to their first
	// sequence.
	started map[string]int64
}

func (d *Door) newReader(sess store.Session, name string, raw bool) *logReader {
	return &logReader{d: d, sess: sess, name: name, raw: raw, ix: d.index.session(sess.TenantID + "/" + sess.ID),
		started: map[string]int64{}}
}

// seek positions the reader at the turn holding the event after offset,
// and returns the events of the session's start when it is to be read too
// (all of them: the caller skips those up to offset).
func (r *logReader) seek(ctx context.Context, offset int64) ([]UniversalEvent, error) {
	if start := r.ix.startEvents(); start > 0 && offset >= start {
		r.next, r.cursor = r.ix.locate(offset)
		return nil, nil
	}
	seed, err := r.d.cfg.Store.SessionSeed(ctx, r.sess.TenantID, r.sess.ID)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{"agent": r.sess.AgentName, "nativeSessionId": r.sess.ID}
	if r.sess.HistoryTrimmedThrough > 0 {
		// The tenant's retention dropped the start of the full history
		// (docs/lifecycle.md, "Retention"): the seed and the client's
		// messages of the turns up to this position are no longer shown,
		// as AAP v3's history read says with trimmedThrough.
		meta["historyTrimmedThrough"] = r.sess.HistoryTrimmedThrough
	}
	drafts := []draft{{typ: evSessionStarted, source: sourceDaemon, synthetic: true,
		data: sessionStartedData{Metadata: meta}}}
	for i, m := range seed {
		drafts = append(drafts, messageItem(r.sess.ID+"-seed-"+strconv.Itoa(i+1), m)...)
	}
	r.next = 1
	out, err := r.finish(drafts, r.sess.CreatedAt)
	if err != nil {
		return nil, err
	}
	r.ix.setStart(int64(len(out)))
	return out, nil
}

// pull reads and translates the next page of the log. done reports that
// the log holds nothing more for now; when the session has ended and no
// turn runs, its last event is session.ended.
func (r *logReader) pull(ctx context.Context) (events []UniversalEvent, done bool, err error) {
	page, err := r.d.cfg.Runner.SessionEvents(ctx, agents.SessionLogParams{
		TenantID: r.sess.TenantID, SessionID: r.sess.ID, After: r.cursor, Limit: logPage})
	if err != nil {
		return nil, false, err
	}
	if events, err = r.consume(ctx, page.Events); err != nil {
		return nil, false, err
	}
	if page.HasMore {
		return events, false, nil
	}
	if r.tr == nil && r.sess.EndedAt != nil && !r.endSent {
		end, err := r.end()
		if err != nil {
			return nil, false, err
		}
		events = append(events, end...)
	}
	return events, true, nil
}

// end is session.ended, the log's last event.
func (r *logReader) end() ([]UniversalEvent, error) {
	r.endSent = true
	return r.finish([]draft{{typ: evSessionEnded, source: sourceDaemon,
		data: sessionEndedData{Reason: "terminated", TerminatedBy: sourceDaemon}}}, *r.sess.EndedAt)
}

// consume translates events of the AAP log that follow what the reader has
// read. Each turn's events are translated by a translator of its own,
// begun at its turn_start with what the turn was started with; an ended
// turn is added to the index.
func (r *logReader) consume(ctx context.Context, events []agents.SessionEvent) ([]UniversalEvent, error) {
	if err := r.loadInputs(ctx, events); err != nil {
		return nil, err
	}
	var out []UniversalEvent
	for _, e := range events {
		var drafts []draft
		if r.tr == nil || e.TurnID != r.cur.turnID {
			if r.tr != nil || e.Seq != 1 {
				return nil, fmt.Errorf("session %s: the log goes on with event %d of turn %s after turn %s", r.sess.ID, e.Seq, e.TurnID, r.cur.turnID)
			}
			in, ok := r.inputs[e.TurnID]
			if !ok {
				return nil, fmt.Errorf("session %s: no record of turn %s", r.sess.ID, e.TurnID)
			}
			r.tr = newTranslator(e.TurnID, in, r.pendingOf(e.TurnID))
			r.cur = span{turnID: e.TurnID, after: r.cursor, first: r.next}
			r.started[e.TurnID] = r.next
			drafts = r.tr.start()
		}
		at := r.tr.in.CreatedAt
		more, err := r.tr.event(ctx, e.Event, logItem(e))
		if err != nil {
			return nil, err
		}
		drafts = append(drafts, more...)
		translated, err := r.finish(drafts, at)
		if err != nil {
			return nil, err
		}
		out = append(out, translated...)
		r.cursor = e.ID
		if e.Event.Type == aap.EventTurnStop {
			r.cur.end, r.cur.n = e.ID, r.next-r.cur.first
			r.ix.record(r.cur)
			r.tr = nil
		}
	}
	return out, nil
}

// turnEnded reports whether the reader has read the turn to its end.
func (r *logReader) turnEnded(turnID string) bool {
	_, ok := r.started[turnID]
	return ok && (r.tr == nil || r.cur.turnID != turnID)
}

// forget drops the turn being read, which left the log (agents.ErrTurnLost:
// a database crash took it before it ended): the reader goes on from what
// preceded it, whose next events take its place.
func (r *logReader) forget() {
	if r.tr == nil {
		return
	}
	delete(r.started, r.cur.turnID)
	r.tr, r.next, r.cursor = nil, r.cur.first, r.cur.after
}

// loadInputs reads the inputs of the turns that begin among events.
func (r *logReader) loadInputs(ctx context.Context, events []agents.SessionEvent) error {
	var ids []string
	for _, e := range events {
		if e.Seq == 1 {
			if _, ok := r.inputs[e.TurnID]; !ok {
				ids = append(ids, e.TurnID)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	got, err := r.d.cfg.Store.TurnInputs(ctx, r.sess.TenantID, r.sess.ID, ids)
	if err != nil {
		return err
	}
	// Only the turns being read are kept: the one under way, and these.
	if r.tr != nil {
		got[r.cur.turnID] = r.inputs[r.cur.turnID]
	}
	r.inputs = got
	return nil
}

// pendingOf returns what a turn left pending, for its translator to read
// at its turn_stop: from its inputs once recorded (a turn read live was
// begun before its end wrote them), else, for a turn that ended before
// aapd recorded them, worked out from its calls.
func (r *logReader) pendingOf(turnID string) func(context.Context, []aap.ToolCall) ([]aap.PendingToolCall, error) {
	return func(ctx context.Context, calls []aap.ToolCall) ([]aap.PendingToolCall, error) {
		if in := r.inputs[turnID]; in.Pending != nil {
			return in.Pending, nil
		}
		got, err := r.d.cfg.Store.TurnInputs(ctx, r.sess.TenantID, r.sess.ID, []string{turnID})
		if err != nil {
			return nil, err
		}
		if p := got[turnID].Pending; p != nil {
			return p, nil
		}
		agent, _ := r.d.cfg.Agents.Get(r.sess.AgentName)
		var out []aap.PendingToolCall
		for _, c := range calls {
			out = append(out, aap.PendingToolCall{ToolCall: c, Server: agent != nil && agent.HasTool(c.Name)})
		}
		return out, nil
	}
}

// finish gives drafts their places in the log, from r.next on.
func (r *logReader) finish(drafts []draft, at time.Time) ([]UniversalEvent, error) {
	out := make([]UniversalEvent, len(drafts))
	stamp := at.UTC().Format(time.RFC3339Nano)
	for i, d := range drafts {
		e := UniversalEvent{
			EventID: "evt_" + strconv.FormatInt(r.next, 10), Sequence: r.next, Time: stamp,
			SessionID: r.name, NativeSessionID: r.sess.ID, Synthetic: d.synthetic, Source: d.source,
			Type: d.typ, Data: d.data,
		}
		if r.raw && d.raw != nil {
			b, err := json.Marshal(d.raw)
			if err != nil {
				return nil, fmt.Errorf("encode raw event: %w", err)
			}
			e.Raw = b
		}
		out[i] = e
		r.next++
	}
	return out, nil
}

// logItem is an event of the AAP log as GET /sessions/:id/events shows
// it: what include_raw adds to the events translated from it.
func logItem(e agents.SessionEvent) any {
	return map[string]any{"id": e.ID, "turnId": e.TurnID, "seq": e.Seq, "event": e.Event.Type, "data": e.Event}
}

// readPage reads up to limit events after offset, and whether the log
// holds more.
func (r *logReader) readPage(ctx context.Context, offset int64, limit int) ([]UniversalEvent, bool, error) {
	out := []UniversalEvent{}
	keep := func(events []UniversalEvent) {
		for _, e := range events {
			if e.Sequence > offset {
				out = append(out, e)
			}
		}
	}
	pre, err := r.seek(ctx, offset)
	if err != nil {
		return nil, false, err
	}
	keep(pre)
	for len(out) <= limit {
		events, done, err := r.pull(ctx)
		if err != nil {
			return nil, false, err
		}
		keep(events)
		if done {
			break
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}
