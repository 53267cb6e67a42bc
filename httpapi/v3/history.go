package v3

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// getHistory is GET /sessions/:id/history?type=full|compacted. The history
// is written as it is read from the database, so a session of any length is
// served in constant memory. A full history the tenant's retention trimmed
// says so: trimmedThrough is the last seq dropped from its start.
func (d *Door) getHistory(w http.ResponseWriter, r *http.Request) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	typ := aap.HistoryType(q.Get("type"))
	if typ != aap.HistoryFull && typ != aap.HistoryCompacted {
		return &aap.Error{Field: "type", Msg: fmt.Sprintf(`must be "compacted" or "full", not %q`, typ)}
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	tenant := httpapi.TenantOf(r)
	sess, err := d.cfg.Store.SessionGetOwned(r.Context(), tenant, httpapi.OwnerOf(r), id)
	if err != nil {
		return err
	}
	if agent, ok := d.cfg.Agents.Get(sess.AgentName); !ok || !agent.Info.SupportsHistory(typ) {
		return httpapi.NotFound("the session's agent does not serve %s history", typ)
	}

	// The head is written with the first row, so that a failure before any
	// row is still a proper error response.
	var bw *bufio.Writer
	start := func() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		bw = bufio.NewWriterSize(w, 32<<10)
		fmt.Fprintf(bw, `{"history":{%q:[`, typ)
	}
	n := 0
	trimmed, err := d.cfg.Store.HistoryEach(r.Context(), store.HistoryParams{TenantID: tenant, SessionID: id, Type: typ},
		func(_ int64, msg json.RawMessage) error {
			if n == 0 {
				start()
			} else {
				bw.WriteByte(',')
			}
			n++
			_, err := bw.Write(msg)
			return err
		})
	if err != nil {
		if n == 0 {
			return err
		}
		// Mid-body: the client must not mistake a cut history for a whole one.
		d.edge.Logger().ErrorContext(r.Context(), "history cut short", "session", id, "err", err)
		panic(http.ErrAbortHandler)
	}
	if n == 0 {
		start()
	}
	bw.WriteString("]}")
	if typ == aap.HistoryFull && trimmed > 0 {
		// The tenant's retention dropped the start of the full history
		// (docs/lifecycle.md, "Retention"): the messages up to this seq,
		// as of the rows written (not sess, read before them).
		fmt.Fprintf(bw, `,"trimmedThrough":%d`, trimmed)
	}
	bw.WriteString("}\n")
	return bw.Flush()
}
