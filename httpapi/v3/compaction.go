package v3

import (
	"net/http"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// CompactResponse is the body of POST /sessions/:id/compact.
type CompactResponse struct {
	Compacted bool `json:"compacted"`
	// Compaction is the record of what was done, when Compacted.
	Compaction *store.Compaction `json:"compaction,omitempty"`
	// Tokens and Reason say, when nothing was done, how big the history is
	// and why it stays as it is.
	Tokens int    `json:"tokens,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// compactSession is POST /sessions/:id/compact (extension): compact the
// session's history now with its agent's policy (docs/compaction.md). 409
// while a turn runs.
func (d *Door) compactSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	out, err := d.cfg.Runner.Compact(r.Context(), agents.CompactParams{TenantID: httpapi.TenantOf(r), SessionID: id, Owner: httpapi.OwnerOf(r)})
	if err != nil {
		return err
	}
	resp := CompactResponse{Compacted: out.Changed, Tokens: out.Tokens, Reason: out.Reason}
	if out.Changed {
		resp.Compaction = &out.Record
	}
	return httpapi.WriteJSON(w, http.StatusOK, resp)
}

// CompactionList is the body of GET /sessions/:id/compactions.
type CompactionList struct {
	Compactions []store.Compaction `json:"compactions"`
}

// listCompactions is GET /sessions/:id/compactions (extension): the
// session's compactions, newest first (at most ?limit=, default 20).
func (d *Door) listCompactions(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	tenant := httpapi.TenantOf(r)
	if _, err := d.cfg.Store.SessionGetOwned(r.Context(), tenant, httpapi.OwnerOf(r), id); err != nil {
		return err
	}
	list, err := d.cfg.Store.CompactionList(r.Context(), tenant, id, limit)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, CompactionList{Compactions: list})
}
