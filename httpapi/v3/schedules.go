package v3

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/scheduler/spec"
	"github.com/aapd/aapd/store"
)

// Schedules (docs/background.md#schedules): POST /sessions/:id/schedules
// makes a schedule that starts a background turn of the session at each
// tick — a cron expression in a time zone, or a fixed interval — until its
// endAt; GET lists them, GET and DELETE …/schedules/:scheduleId read and
// delete one. They follow the session's rules: its tenant, its owner, its
// scopes.

// ScheduleInfo is a schedule's record.
type ScheduleInfo struct {
	ScheduleID string `json:"scheduleId"`
	SessionID  string `json:"sessionId"`
	// Cron and Timezone, or Every, say when it ticks.
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Every    string `json:"every,omitempty"`
	// Messages and Stream are the turn each tick starts.
	Messages []aap.Message  `json:"messages"`
	Stream   aap.StreamMode `json:"stream"`
	EndAt    *time.Time     `json:"endAt,omitempty"`
	// State is "active", or "ended" once no tick is left before endAt.
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"createdAt"`
	NextRunAt  *time.Time `json:"nextRunAt,omitempty"`
	LastRunAt  *time.Time `json:"lastRunAt,omitempty"`
	LastTurnID string     `json:"lastTurnId,omitempty"`
	// Runs counts the ticks that started a turn; the skipped counts those
	// that did not: the session still ran a turn, the tick was missed
	// while no replica ran and was more than a period late, or the turn
	// was refused (LastError says why).
	Runs           int64  `json:"runs"`
	SkippedRunning int64  `json:"skippedRunning"`
	SkippedMissed  int64  `json:"skippedMissed"`
	SkippedRefused int64  `json:"skippedRefused"`
	LastError      string `json:"lastError,omitempty"`
}

func scheduleInfo(sc store.Schedule) ScheduleInfo {
	info := ScheduleInfo{
		ScheduleID: sc.ID, SessionID: sc.SessionID, Cron: sc.Cron, Timezone: sc.Timezone,
		Messages: sc.Request.Messages, Stream: sc.Request.Mode(), EndAt: utcPtr(sc.EndAt), State: "active",
		CreatedAt: sc.CreatedAt.UTC(), NextRunAt: utcPtr(sc.NextRunAt), LastRunAt: utcPtr(sc.LastRunAt),
		LastTurnID: sc.LastTurnID, Runs: sc.Runs, SkippedRunning: sc.SkippedRunning,
		SkippedMissed: sc.SkippedMissed, SkippedRefused: sc.SkippedRefused, LastError: sc.LastError,
	}
	if sc.Cron != "" && sc.Timezone == "" {
		info.Timezone = "UTC"
	}
	if sc.Every != 0 {
		info.Every = sc.Every.String()
	}
	if sc.NextRunAt == nil {
		info.State = "ended"
	}
	return info
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ScheduleList is the body of GET /sessions/:id/schedules.
type ScheduleList struct {
	Schedules []ScheduleInfo `json:"schedules"`
}

// maxEndAtLength bounds endAt's text before it is parsed or quoted back:
// "2027-12-31T23:00:00.123456789+01:00" has 35 bytes.
const maxEndAtLength = 64

// scheduleMembers are the members of a schedule's request.
var scheduleMembers = []string{"cron", "timezone", "every", "endAt", "messages", "stream"}

// createSchedule is POST /sessions/:id/schedules.
func (d *Door) createSchedule(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	sc, err := d.decodeSchedule(body)
	if err != nil {
		return err
	}
	tenant, owner := httpapi.TenantOf(r), httpapi.OwnerOf(r)
	sess, err := d.cfg.Store.SessionGetOwned(r.Context(), tenant, owner, id)
	if err != nil {
		return err
	}
	if sess.EndedAt != nil {
		return store.ErrSessionEnded
	}
	// Its turn is checked as a turn of the session is, now rather than at
	// its first tick.
	agent, ok := d.cfg.Agents.Get(sess.AgentName)
	if !ok {
		return &aap.Error{Field: "messages", Msg: fmt.Sprintf("the session's agent %q is not served by this server", sess.AgentName)}
	}
	if err := aap.ValidateTurn(sc.Request, sess.AgentName, sess.AgentTools, agent.Info); err != nil {
		return err
	}
	sc.TenantID, sc.SessionID, sc.ID = tenant, id, store.NewScheduleID()
	created, err := d.cfg.Store.ScheduleCreate(r.Context(), store.ScheduleCreateParams{Schedule: sc, SessionOwner: owner})
	if errors.Is(err, store.ErrScheduleLimit) {
		return &aap.Error{Field: "", Msg: fmt.Sprintf("the session has %d schedules, the most it may have: delete one first", store.MaxSchedulesPerSession)}
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/sessions/"+id+"/schedules/"+created.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, scheduleInfo(created))
}

// decodeSchedule reads and checks a schedule's request, but its turn
// against its session: its timing, its end and its first tick.
func (d *Door) decodeSchedule(body []byte) (store.Schedule, error) {
	var members map[string]json.RawMessage
	if err := d.edge.Decode(body, &members); err != nil {
		return store.Schedule{}, err
	}
	if members == nil {
		return store.Schedule{}, &aap.Error{Msg: "the body must be a JSON object"}
	}
	var unknown []string
	for k := range members {
		if !contains(scheduleMembers, k) {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return store.Schedule{}, &aap.Error{Field: strings.Trim(unknown[0], `"`), Msg: fmt.Sprintf("a schedule has no member %s (it has %s)",
			strings.Join(unknown, ", "), strings.Join(scheduleMembers, ", "))}
	}
	var req struct {
		Cron     string `json:"cron"`
		Timezone string `json:"timezone"`
		Every    string `json:"every"`
		EndAt    string `json:"endAt"`
	}
	if err := d.edge.Decode(body, &req); err != nil {
		return store.Schedule{}, err
	}
	var sc store.Schedule
	if n := len(members["messages"]); n > spec.MaxMessagesBytes {
		return store.Schedule{}, &aap.Error{Field: "messages", Msg: fmt.Sprintf("has %d bytes of JSON, more than a schedule's turn may have (%d): it is stored with the schedule and sent again at every tick; put a long document in the session's history or the agent's system prompt",
			n, spec.MaxMessagesBytes)}
	}
	// The turn: decoded as a turn request's messages and stream are.
	turn, err := json.Marshal(map[string]json.RawMessage{"messages": members["messages"], "stream": members["stream"]})
	if err != nil {
		return store.Schedule{}, err
	}
	if err := d.edge.Decode(turn, &sc.Request); err != nil {
		return store.Schedule{}, err
	}
	if len(sc.Request.Messages) != 1 || sc.Request.Messages[0].Role != aap.RoleUser {
		return store.Schedule{}, &aap.Error{Field: "messages", Msg: "a schedule's turn is one user message"}
	}
	var every time.Duration
	if req.Every != "" {
		if every, err = spec.ParseEveryText(req.Every); err != nil {
			return store.Schedule{}, fieldError(err)
		}
	}
	sp, err := spec.Parse(req.Cron, req.Timezone, every)
	if err != nil {
		return store.Schedule{}, fieldError(err)
	}
	now := time.Now()
	first := sp.First(now)
	if req.EndAt != "" {
		if len(req.EndAt) > maxEndAtLength {
			return store.Schedule{}, &aap.Error{Field: "endAt", Msg: fmt.Sprintf("has %d bytes, more than a time in RFC 3339 form needs (at most %d)", len(req.EndAt), maxEndAtLength)}
		}
		end, err := time.Parse(time.RFC3339Nano, req.EndAt)
		if err != nil {
			return store.Schedule{}, &aap.Error{Field: "endAt", Msg: fmt.Sprintf("%q is not a time in RFC 3339 form, such as \"2027-12-31T23:00:00Z\"", req.EndAt)}
		}
		switch {
		case !end.After(now):
			return store.Schedule{}, &aap.Error{Field: "endAt", Msg: fmt.Sprintf("%s is in the past", end.UTC().Format(time.RFC3339))}
		case end.Before(first):
			return store.Schedule{}, &aap.Error{Field: "endAt", Msg: fmt.Sprintf("%s is before the schedule's first tick, %s: it would never run",
				end.UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339))}
		}
		end = end.UTC()
		sc.EndAt = &end
	}
	sc.Cron, sc.Timezone, sc.Every, sc.NextRunAt = strings.TrimSpace(req.Cron), req.Timezone, every, &first
	return sc, nil
}

// fieldError turns the scheduler's refusal into the protocol's.
func fieldError(err error) error {
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return &aap.Error{Field: fe.Field, Msg: fe.Msg}
	}
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// scheduleRef reads the session and schedule of the route.
func scheduleRef(r *http.Request) (store.ScheduleRef, error) {
	id, err := sessionID(r)
	if err != nil {
		return store.ScheduleRef{}, err
	}
	sid := mux.Vars(r)["scheduleId"]
	if !store.ValidID("sch_", sid) {
		return store.ScheduleRef{}, httpapi.NotFound("no such schedule")
	}
	return store.ScheduleRef{TenantID: httpapi.TenantOf(r), SessionID: id, ScheduleID: sid}, nil
}

// listSchedules is GET /sessions/:id/schedules: the session's schedules,
// oldest first.
func (d *Door) listSchedules(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	list, err := d.cfg.Store.ScheduleList(r.Context(), httpapi.TenantOf(r), httpapi.OwnerOf(r), id)
	if err != nil {
		return err
	}
	out := ScheduleList{Schedules: make([]ScheduleInfo, len(list))}
	for i, sc := range list {
		out.Schedules[i] = scheduleInfo(sc)
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

// getSchedule is GET /sessions/:id/schedules/:scheduleId.
func (d *Door) getSchedule(w http.ResponseWriter, r *http.Request) error {
	ref, err := scheduleRef(r)
	if err != nil {
		return err
	}
	sc, err := d.cfg.Store.ScheduleGet(r.Context(), ref, httpapi.OwnerOf(r))
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound("no such schedule")
	}
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, scheduleInfo(sc))
}

// deleteSchedule is DELETE /sessions/:id/schedules/:scheduleId: no tick
// of it starts a turn once it answers; a turn it started runs on.
func (d *Door) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	ref, err := scheduleRef(r)
	if err != nil {
		return err
	}
	err = d.cfg.Store.ScheduleDelete(r.Context(), ref, httpapi.OwnerOf(r))
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.NotFound("no such schedule")
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
