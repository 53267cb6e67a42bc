package v3

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/transfer"
)

// exportSession is GET /sessions/:id/export (extension, docs/lifecycle.md):
// the session's document, JSON Lines, written as it is read from the
// database, so a session of any size is served in constant memory. Secret
// option values never leave: the document names the secret options set.
func (d *Door) exportSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	out := &httpapi.LazyWriter{W: w, Start: func() {
		h := w.Header()
		h.Set("Content-Type", transfer.ContentType)
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.jsonl"`, id))
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	}}
	_, err = transfer.WriteSession(r.Context(), out, d.cfg.Store,
		store.SessionExportParams{TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), SessionID: id},
		transfer.WriteOptions{DeclaredSecrets: d.declaredSecrets})
	if err == nil || !out.Started {
		return pointError(err)
	}
	// Mid-document: the trailer is missing, which every reader refuses;
	// the connection is cut so that the client sees it broken at once.
	d.edge.Logger().ErrorContext(r.Context(), "export cut short", "session", id, "err", err)
	panic(http.ErrAbortHandler)
}

// canRun refuses an imported session this server cannot run: an agent it
// does not have, options or tools the agent does not take.
func (d *Door) canRun(s transfer.Session) error {
	agent, ok := d.cfg.Agents.Get(s.Agent.Name)
	if !ok {
		return fmt.Errorf("session.agent.name: unknown agent %q (this server has %s)", s.Agent.Name, strings.Join(quote(d.cfg.Agents.Names()), ", "))
	}
	if err := aap.ValidateOptions("session.agent.options", s.Agent.Options, agent.Info); err != nil {
		return err
	}
	if err := aap.ValidateClientTools("session.tools", s.Tools, s.Agent.Tools, agent.Info); err != nil {
		return err
	}
	return aap.ValidateServerTools("session.agent.tools", s.Agent.Tools, s.Tools)
}

// declaredSecrets returns the secret options an agent declares.
func (d *Door) declaredSecrets(agent string) []string {
	a, ok := d.cfg.Agents.Get(agent)
	if !ok {
		return nil
	}
	var out []string
	for _, o := range a.Info.Options {
		if o.Type == aap.OptionSecret {
			out = append(out, o.Name)
		}
	}
	return out
}

// importSession is POST /sessions/import (extension, docs/lifecycle.md): a
// session of the caller's tenant from a document, read as it arrives and
// written in one transaction: 201 with its record, or, for a document that
// breaks a rule, a 400 naming the line and the rule, and nothing written.
// Its owner is the token's subject, or ?owner= for an API key.
func (d *Door) importSession(w http.ResponseWriter, r *http.Request) error {
	owner, err := newOwner(r)
	if err != nil {
		return err
	}
	body := d.edge.StreamBody(w, r, d.cfg.ImportMaxBytes)
	sess, err := transfer.ReadSession(r.Context(), body, d.cfg.Store, transfer.ReadOptions{
		TenantID: httpapi.TenantOf(r), Owner: owner,
		Check: d.canRun,
	})
	var line *transfer.LineError
	switch {
	case errors.As(err, &line):
		p := httpapi.NewProblem(http.StatusBadRequest, "invalid-document", "Invalid document", "%s", line.Error())
		p.Line, p.Rule = line.Line, line.Rule
		return p
	case err != nil:
		return err
	}
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	w.Header().Set("Location", "/sessions/"+sess.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, sessionRecord(sess))
}
