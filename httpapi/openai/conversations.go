package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Labels of a session this door keeps (store.Session.Labels).
const (
	// labelMetadata is the conversation's metadata, as JSON.
	labelMetadata = "openai.metadata"
	// labelAgent is "unset" on a conversation created without a model: its
	// first response's model names its agent (store.SessionRebind).
	labelAgent = "openai.agent"
	agentUnset = "unset"
)

// Metadata limits, OpenAI's.
const (
	maxMetadataKeys  = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
	// maxItemsAdded bounds the items one request adds to a conversation.
	maxItemsAdded = 20
)

// Item listing sizes (OpenAI's).
const (
	defaultItemLimit = 20
	maxItemLimit     = 100
)

// conversation is OpenAI's Conversation object.
type conversation struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func conversationOf(sess store.Session) conversation {
	return conversation{ID: sess.ID, Object: "conversation", CreatedAt: sess.CreatedAt.Unix(), Metadata: metadataOf(sess)}
}

// metadataOf is the conversation's metadata ({} for none).
func metadataOf(sess store.Session) map[string]string {
	md := map[string]string{}
	if v := sess.Labels[labelMetadata]; v != "" {
		_ = json.Unmarshal([]byte(v), &md) // written by this door: a map of strings
	}
	return md
}

// checkMetadata checks metadata against OpenAI's limits and returns it as
// the label that keeps it.
func checkMetadata(param string, md map[string]string) (string, error) {
	if md == nil {
		md = map[string]string{}
	}
	if len(md) > maxMetadataKeys {
		return "", invalid(param, "at most %d keys", maxMetadataKeys)
	}
	for k, v := range md {
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return "", invalid(param, "key %q is longer than %d characters", k, maxMetadataKey)
		}
		if utf8.RuneCountInString(v) > maxMetadataValue {
			return "", invalid(param, "the value of %q is longer than %d characters", k, maxMetadataValue)
		}
	}
	b, err := json.Marshal(md)
	return string(b), err
}

// defaultAgent is the agent a conversation created without a model runs
// until its first response names one.
func (d *Door) defaultAgent() *agents.Agent {
	a, _ := d.cfg.Agents.Get(d.cfg.Agents.Names()[0])
	return a
}

// serverTools enables every server tool of the agent, trusted: an OpenAI
// client calls a conversation's tools without a permission step (an
// untrusted call, on a session made over AAP, is an mcp_approval_request).
func serverTools(a *agents.Agent) []aap.ServerToolRef {
	var out []aap.ServerToolRef
	for _, t := range a.Info.Tools {
		out = append(out, aap.ServerToolRef{Name: t.Name, Trust: true})
	}
	return out
}

// createConversation is POST /conversations: a new session, seeded with
// the items given (up to 20), with the metadata given. It has no model:
// its first response's model names its agent.
func (d *Door) createConversation(w http.ResponseWriter, r *http.Request) error {
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	msgs, md, err := decodeConversation(body)
	if err != nil {
		return err
	}
	a := d.defaultAgent()
	cfg := aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: a.Info.Name, Tools: serverTools(a)}, Messages: msgs}
	if err := aap.ValidateCreateSession(cfg, a.Info); err != nil {
		return err
	}
	sess, _, err := d.cfg.Runner.CreateSession(r.Context(), store.SessionCreateParams{
		TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), AgentName: a.Info.Name, AgentTools: cfg.Agent.Tools,
		Messages: msgs, Pending: aap.PendingFromHistory(msgs, nil),
		Labels: map[string]string{labelMetadata: md, labelAgent: agentUnset},
	})
	if err != nil {
		return err
	}
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	return httpapi.WriteJSON(w, http.StatusOK, conversationOf(sess))
}

// conversationRequest is the body of POST /conversations.
type conversationRequest struct {
	Items    []inputItem       `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

// decodeConversation reads and checks the body of POST /conversations
// (empty for none): the messages its items are, and its metadata as the
// label that keeps it.
func decodeConversation(body []byte) ([]aap.Message, string, error) {
	var req conversationRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, "", invalid("", "the body must be a JSON object with items and metadata: %v", err)
		}
	}
	if len(req.Items) > maxItemsAdded {
		return nil, "", invalid("items", "at most %d items at once", maxItemsAdded)
	}
	md, err := checkMetadata("metadata", req.Metadata)
	if err != nil {
		return nil, "", err
	}
	msgs, err := toMessages("items", req.Items)
	if err != nil {
		return nil, "", err
	}
	return msgs, md, nil
}

// itemsRequest is the body of POST /conversations/{id}/items.
type itemsRequest struct {
	Items []inputItem `json:"items"`
}

// decodeItems reads and checks the body of POST
// /conversations/{id}/items: the messages its items are, one at least.
func decodeItems(body []byte) ([]aap.Message, error) {
	var req itemsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, invalid("items", "the body must be a JSON object with items: %v", err)
	}
	switch {
	case len(req.Items) == 0:
		return nil, invalid("items", "at least one item")
	case len(req.Items) > maxItemsAdded:
		return nil, invalid("items", "at most %d items at once", maxItemsAdded)
	}
	return toMessages("items", req.Items)
}

// session resolves a conversation id (an aapd session id) among the
// caller's sessions: another tenant's, another end user's, or none is a
// 404.
func (d *Door) session(r *http.Request, id, param string) (store.Session, error) {
	if !store.ValidID("sess_", id) {
		return store.Session{}, notFound(param, "no conversation %q", id)
	}
	sess, err := d.cfg.Store.SessionGetOwned(r.Context(), httpapi.TenantOf(r), httpapi.OwnerOf(r), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, notFound(param, "no conversation %q", id)
	}
	if err != nil {
		return store.Session{}, err
	}
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	return sess, nil
}

func (d *Door) routeSession(r *http.Request) (store.Session, error) {
	return d.session(r, mux.Vars(r)["conversation_id"], "conversation_id")
}

// getConversation is GET /conversations/{id}.
func (d *Door) getConversation(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, conversationOf(sess))
}

// updateConversation is POST /conversations/{id}: its metadata replaced.
func (d *Door) updateConversation(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Metadata *map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return invalid("metadata", "the body must be a JSON object with metadata, a map of strings: %v", err)
	}
	if req.Metadata == nil {
		return invalid("metadata", "required")
	}
	md, err := checkMetadata("metadata", *req.Metadata)
	if err != nil {
		return err
	}
	sess, err = d.cfg.Store.SessionSetLabels(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID, map[string]string{labelMetadata: md})
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, conversationOf(sess))
}

// deleteConversation is DELETE /conversations/{id}: the session is
// deleted, its items and responses with it, and a turn running on it is
// stopped (stronger than OpenAI, which keeps the items).
func (d *Door) deleteConversation(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	if err := d.cfg.Runner.DeleteSession(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": sess.ID, "object": "conversation.deleted", "deleted": true})
}

// itemList is OpenAI's page of items.
type itemList struct {
	Object  string  `json:"object"`
	Data    []Item  `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
	// TrimmedThrough, an extension, is set on every page of a
	// conversation's items (and of a response's input items) when the tenant's retention trimmed the start of
	// its full history (docs/lifecycle.md, "Retention"): the messages up to
	// this position (AAP's, as GET /sessions/:id/history?type=full counts
	// them) are gone, so the oldest item listed is not the conversation's
	// first. OpenAI's clients ignore a member they do not know.
	TrimmedThrough int64 `json:"trimmed_through,omitempty"`
}

func newItemList(items []Item, more bool) itemList {
	l := itemList{Object: "list", Data: items, HasMore: more}
	if l.Data == nil {
		l.Data = []Item{}
	}
	if len(items) > 0 {
		l.FirstID, l.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	return l
}

// allItems reads the session's full history as items, oldest first, and
// where the tenant's retention trimmed it, as of the messages read (the
// page's trimmed_through: never sess's, read before them).
func (d *Door) allItems(r *http.Request, sess store.Session) ([]Item, int64, error) {
	var msgs []store.StoredMessage
	trimmed, err := d.cfg.Store.HistoryEach(r.Context(), store.HistoryParams{TenantID: sess.TenantID, SessionID: sess.ID, Type: aap.HistoryFull},
		func(seq int64, raw json.RawMessage) error {
			var m aap.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("decode message %d: %w", seq, err)
			}
			msgs = append(msgs, store.StoredMessage{Seq: seq, Message: m})
			return nil
		})
	if err != nil {
		return nil, 0, err
	}
	agent, _ := d.cfg.Agents.Get(sess.AgentName)
	t := newTranslator(sess, agent)
	msgs = withoutOrphanResults(msgs)
	t.see(msgs)
	return t.items(msgs, t.serverCalls(msgs)), trimmed, nil
}

// withoutOrphanResults leaves out the tool results whose call is not among
// msgs: in a full history, those whose call the tenant's retention trimmed
// (the trimmed prefix may end between a call and its result). Without its
// call such a result cannot say what it is the output of — a server tool's
// shows as its call's mcp_call, a client function's follows its
// function_call — so the items of a trimmed conversation start with the
// first whole one after trimmed_through, and the id of the result's item
// is a 404 as the trimmed items' are.
func withoutOrphanResults(msgs []store.StoredMessage) []store.StoredMessage {
	called := map[string]bool{}
	out := msgs[:0:0]
	for _, m := range msgs {
		for _, c := range m.Message.ToolCalls() {
			called[c.ToolCallID] = true
		}
		if m.Message.Role == aap.RoleTool && !called[m.Message.ToolCallID] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// listItems is GET /conversations/{id}/items: the items of the full
// history, newest first unless order=asc, limit (1 to 100, 20) after the
// item named by after.
func (d *Door) listItems(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	items, trimmed, err := d.allItems(r, sess)
	if err != nil {
		return err
	}
	return d.writePage(w, r, items, trimmed)
}

// writePage answers a page of items (oldest first), as the query asks:
// newest first unless order=asc, limit (1 to 100, 20) after the item named
// by after.
func (d *Door) writePage(w http.ResponseWriter, r *http.Request, items []Item, trimmed int64) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit := defaultItemLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxItemLimit {
			return invalid("limit", "must be a whole number from 1 to %d", maxItemLimit)
		}
		limit = n
	}
	switch q.Get("order") {
	case "", "desc":
		slices.Reverse(items)
	case "asc":
	default:
		return invalid("order", `must be "asc" or "desc"`)
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it Item) bool { return it.ID == after })
		if i < 0 {
			return notFound("after", "no item %q", after)
		}
		items = items[i+1:]
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	page := newItemList(items, more)
	page.TrimmedThrough = trimmed
	return httpapi.WriteJSON(w, http.StatusOK, page)
}

// getItem is GET /conversations/{id}/items/{item_id}.
func (d *Door) getItem(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	id := mux.Vars(r)["item_id"]
	if _, ok := parseItemID(id, hexOf(sess.ID)); !ok && !isApprovalID(id) {
		return itemNotFound(sess.ID, id)
	}
	items, _, err := d.allItems(r, sess)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.ID == id {
			return httpapi.WriteJSON(w, http.StatusOK, it)
		}
	}
	return itemNotFound(sess.ID, id)
}

func isApprovalID(id string) bool {
	return len(id) > len(idApproval)+1 && id[:len(idApproval)+1] == idApproval+"_"
}

func itemNotFound(sessionID, id string) error {
	p := httpapi.NewProblem(http.StatusNotFound, slugUnknownItem, "Not found", "conversation %s has no item %q", sessionID, id)
	p.Field = "item_id"
	return p
}

// createItems is POST /conversations/{id}/items: up to 20 items appended
// to the session's history (store.SessionAppend), answered with the items
// as stored. Not while a turn runs (409) nor while the conversation waits
// for function outputs, which a response must bring.
func (d *Door) createItems(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	msgs, err := decodeItems(body)
	if err != nil {
		return err
	}
	agent, ok := d.cfg.Agents.Get(sess.AgentName)
	if !ok {
		return fmt.Errorf("%w: %q", agents.ErrUnknownAgent, sess.AgentName)
	}
	if err := aap.ValidateCreateSession(aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: sess.AgentName}, Messages: msgs}, agent.Info); err != nil {
		return err
	}
	for i, m := range msgs {
		if m.Role == aap.RoleTool || len(m.ToolCalls()) > 0 || m.Role == aap.RoleToolPermission {
			return unsupported(fmt.Sprintf("items[%d]", i), "items added to a conversation are messages; function calls and their outputs come with responses")
		}
	}
	first, err := d.cfg.Store.SessionAppend(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID, msgs)
	var awaits *store.ErrSessionAwaits
	if errors.As(err, &awaits) {
		return httpapi.NewProblem(http.StatusConflict, "turn-running", "Conflict",
			"the conversation waits for the function_call_output of %q: send them with a response first", awaits.Calls)
	}
	if err != nil {
		return err
	}
	stored := make([]store.StoredMessage, len(msgs))
	for i, m := range msgs {
		stored[i] = store.StoredMessage{Seq: first + int64(i), Message: m}
	}
	t := newTranslator(sess, agent)
	return httpapi.WriteJSON(w, http.StatusOK, newItemList(t.items(stored, nil), false))
}

// deleteItem is DELETE /conversations/{id}/items/{item_id}: refused. A
// session's history is append-only: what was said stays said, and what a
// turn saw stays what it saw. Delete the conversation, or start a new one
// from a response (previous_response_id) before the item.
func (d *Door) deleteItem(w http.ResponseWriter, r *http.Request) error {
	sess, err := d.routeSession(r)
	if err != nil {
		return err
	}
	return unsupported("item_id", "aapd keeps a conversation's history append-only: item %s of conversation %s cannot be deleted; delete the conversation, or continue from an earlier response with previous_response_id", quoted(mux.Vars(r)["item_id"]), sess.ID)
}
