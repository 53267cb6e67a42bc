package v1

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Page sizes of GET /v1/sessions, as AAP v3's listing has them.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// getMeta is GET /v1/meta: AAP v3's agents in v1's shape.
func (d *Door) getMeta(w http.ResponseWriter, _ *http.Request) error {
	m := d.cfg.Agents.Meta()
	out := Meta{Version: Version, Agents: make([]AgentInfo, len(m.Agents))}
	for i, a := range m.Agents {
		out.Agents[i] = agentOut(a)
	}
	return writeJSON(w, http.StatusOK, out)
}

// listSessions is GET /v1/sessions: the ids of the tenant's sessions (an
// end user's: their own), newest first, paged with AAP v3's cursor.
func (d *Door) listSessions(w http.ResponseWriter, r *http.Request) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	p, _ := auth.FromContext(r.Context())
	page, err := d.cfg.Sessions.SessionList(r.Context(), store.SessionListParams{
		TenantID: p.TenantID, Owner: p.Owner(), After: q.Get("after"), Limit: limit,
	})
	if errors.Is(err, store.ErrBadCursor) {
		return &aap.Error{Field: "after", Msg: `not a cursor this server issued: pass the "next" (or "nextCursor") value of a previous page`}
	}
	if err != nil {
		return err
	}
	out := SessionList{Sessions: make([]string, len(page.Sessions)), Next: page.Next, NextCursor: page.Next}
	for i, s := range page.Sessions {
		out.Sessions[i] = s.ID
	}
	return writeJSON(w, http.StatusOK, out)
}

// getSession is GET /v1/session/:id: the session, with each history its
// agent declares in capabilities.history inline, and trimmedThrough when
// the tenant's retention trimmed the full history (as AAP v3's history
// read says it; docs/protocols.md). The histories are written
// as they are read from the database, so a session of any length is
// served in constant memory.
func (d *Door) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	p, _ := auth.FromContext(r.Context())
	sess, err := d.cfg.Sessions.SessionGetOwned(r.Context(), p.TenantID, p.Owner(), id)
	if err != nil {
		return err
	}
	info := sess.RedactedInfo()
	head, err := json.Marshal(Session{SessionID: info.SessionID, Agent: info.Agent, Tools: toolsOut(info.Tools)})
	if err != nil {
		return err
	}
	var types []aap.HistoryType
	if agent, ok := d.cfg.Agents.Get(sess.AgentName); ok {
		for _, t := range []aap.HistoryType{aap.HistoryCompacted, aap.HistoryFull} {
			if agent.Info.SupportsHistory(t) {
				types = append(types, t)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if len(types) == 0 {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(head, '\n'))
		return nil
	}
	// Nothing reaches the client until the buffer fills or the body ends,
	// so a failure before then is still a proper error response.
	out := &countingWriter{w: w}
	bw := bufio.NewWriterSize(out, 32<<10)
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"history":{`)
	var trimmed int64 // as of the full history's rows, not of sess
	for i, t := range types {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, "%q:[", t)
		n := 0
		through, err := d.cfg.Sessions.HistoryEach(r.Context(), store.HistoryParams{TenantID: p.TenantID, SessionID: id, Type: t},
			func(_ int64, msg json.RawMessage) error {
				if n > 0 {
					bw.WriteByte(',')
				}
				n++
				_, err := bw.Write(msg)
				return err
			})
		if err != nil {
			if out.n == 0 {
				return err
			}
			// Mid-body: the client must not mistake a cut history for a whole one.
			panic(http.ErrAbortHandler)
		}
		if t == aap.HistoryFull {
			trimmed = through
		}
		bw.WriteByte(']')
	}
	bw.WriteByte('}')
	if trimmed > 0 {
		// The tenant's retention dropped the start of the full history
		// (docs/lifecycle.md, "Retention"): its messages up to this
		// position, as AAP v3's history read says.
		fmt.Fprintf(bw, `,"trimmedThrough":%d`, trimmed)
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// deleteSession is DELETE /v1/session/:id: 204, and the turn running on
// the session stopped.
func (d *Door) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	p, _ := auth.FromContext(r.Context())
	if err := d.cfg.Runner.DeleteSession(r.Context(), p.TenantID, p.Owner(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionID returns the {id} of the route; an id this server never issues
// is no session (404), and is looked up nowhere.
func sessionID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if !store.ValidID("sess_", id) {
		return "", fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	logctx.FromContext(r.Context()).SetSession(id)
	return id, nil
}

// pageLimit reads the optional ?limit= of the listing (an extension, as
// in AAP v3's).
func pageLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageLimit {
		return 0, &aap.Error{Field: "limit", Msg: fmt.Sprintf("must be a whole number from 1 to %d", MaxPageLimit)}
	}
	return n, nil
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// countingWriter counts the bytes that reached the response.
type countingWriter struct {
	w http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
