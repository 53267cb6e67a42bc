package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/scheduler/spec"
	"github.com/aapd/aapd/store/storetest"
)

// Schedules (docs/background.md#schedules) through real servers.

func (c *client) createSchedule(sid string, body any) v3.ScheduleInfo {
	c.t.Helper()
	res := c.do(http.MethodPost, "/sessions/"+sid+"/schedules", body).expect(c.t, http.StatusCreated)
	var sc v3.ScheduleInfo
	res.json(c.t, &sc)
	if loc := res.Header.Get("Location"); loc != "/sessions/"+sid+"/schedules/"+sc.ScheduleID {
		c.t.Errorf("Location = %q", loc)
	}
	return sc
}

func (c *client) getSchedule(sid, id string) v3.ScheduleInfo {
	c.t.Helper()
	var sc v3.ScheduleInfo
	c.do(http.MethodGet, "/sessions/"+sid+"/schedules/"+id, nil).expect(c.t, http.StatusOK).json(c.t, &sc)
	return sc
}

// sessionTurns lists a session's turns, newest first (at most 100).
func (c *client) sessionTurns(sid string) []v3.TurnInfo {
	c.t.Helper()
	var list v3.TurnList
	c.do(http.MethodGet, "/sessions/"+sid+"/turns?limit=100", nil).expect(c.t, http.StatusOK).json(c.t, &list)
	return list.Turns
}

// The routes: create (201, Location, the record), list, get, delete; every
// mistake a 400 naming its member; another tenant's session a 404.
func TestScheduleRoutesAndTheirRefusals(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c, other := srv.newTenant(t), srv.newTenant(t)
	sid := c.echoSession(nil)

	end := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
	daily := c.createSchedule(sid, map[string]any{"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin",
		"messages": []any{userMessage("the morning report")}, "endAt": end})
	if daily.State != "active" || daily.Cron != "0 9 * * 1-5" || daily.Timezone != "Europe/Berlin" || daily.NextRunAt == nil ||
		!daily.EndAt.Equal(end) || len(daily.Messages) != 1 || daily.Stream != "none" {
		t.Errorf("created = %+v", daily)
	}
	if h := daily.NextRunAt.In(mustZone(t, "Europe/Berlin")).Hour(); h != 9 {
		t.Errorf("first tick %s is not at 9 in Berlin", daily.NextRunAt)
	}
	every := c.createSchedule(sid, map[string]any{"every": "30s", "messages": []any{userMessage("ping")}, "stream": "delta"})
	if every.Every != "30s" || every.Stream != "delta" || every.NextRunAt == nil {
		t.Errorf("created = %+v", every)
	}
	var list v3.ScheduleList
	c.do(http.MethodGet, "/sessions/"+sid+"/schedules", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Schedules) != 2 || list.Schedules[0].ScheduleID != daily.ScheduleID || list.Schedules[1].ScheduleID != every.ScheduleID {
		t.Errorf("list = %+v", list)
	}
	if got := c.getSchedule(sid, every.ScheduleID); got.ScheduleID != every.ScheduleID || got.Runs != 0 {
		t.Errorf("get = %+v", got)
	}

	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	soon := time.Now().Add(10 * time.Second).UTC().Format(time.RFC3339)
	msgs := []any{userMessage("x")}
	for _, c2 := range []struct {
		body  string
		field string
	}{
		{`{"cron":"0 25 * * *","messages":[{"role":"user","content":"x"}]}`, "cron"},
		{`{"cron":"every day","messages":[{"role":"user","content":"x"}]}`, "cron"},
		{`{"cron":"0 9 * * *","timezone":"Europe/Atlantis","messages":[{"role":"user","content":"x"}]}`, "timezone"},
		{`{"every":"500ms","messages":[{"role":"user","content":"x"}]}`, "every"},
		{`{"every":"soon","messages":[{"role":"user","content":"x"}]}`, "every"},
		{`{"every":"30s","cron":"* * * * *","messages":[{"role":"user","content":"x"}]}`, "every"},
		{`{"messages":[{"role":"user","content":"x"}]}`, "cron"},
		{`{"every":"30s","endAt":"` + past + `","messages":[{"role":"user","content":"x"}]}`, "endAt"},
		{`{"every":"30s","endAt":"` + soon + `","messages":[{"role":"user","content":"x"}]}`, "endAt"},
		{`{"every":"30s","endAt":"tomorrow","messages":[{"role":"user","content":"x"}]}`, "endAt"},
		{`{"every":"30s"}`, "messages"},
		{`{"every":"30s","messages":[{"role":"assistant","content":"x"}]}`, "messages"},
		{`{"every":"30s","messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`, "messages"},
		{`{"every":"30s","messages":[{"role":"user","content":"x"}],"stream":"fast"}`, "stream"},
		{`{"every":"30s","messages":[{"role":"user","content":"x"}],"repeat":true}`, "repeat"},
		// A definition's text has bounds (docs/background.md#schedules):
		// a 100 KB cron list is refused, not stored.
		{`{"cron":"0` + strings.Repeat(",0", 50_000) + ` * * * *","messages":[{"role":"user","content":"x"}]}`, "cron"},
		{`{"cron":"` + strings.Repeat("1,", 60) + `2 * * * *","messages":[{"role":"user","content":"x"}]}`, "cron"},
		{`{"cron":"0 9 * * *","timezone":"` + strings.Repeat("Europe/", 200) + `Berlin","messages":[{"role":"user","content":"x"}]}`, "timezone"},
		{`{"every":"` + strings.Repeat("0", 100) + `30s","messages":[{"role":"user","content":"x"}]}`, "every"},
		{`{"every":"30s","endAt":"2030-01-01T00:00:00` + strings.Repeat("0", 2000) + `Z","messages":[{"role":"user","content":"x"}]}`, "endAt"},
		{`{"every":"30s","messages":[{"role":"user","content":"` + strings.Repeat("x", spec.MaxMessagesBytes) + `"}]}`, "messages"},
	} {
		p := c.do(http.MethodPost, "/sessions/"+sid+"/schedules", c2.body).expect(t, http.StatusBadRequest).problem(t)
		if field, _ := p["field"].(string); !strings.HasPrefix(field, c2.field) {
			t.Errorf("%.200s: field %v, want %q (%v)", c2.body, p["field"], c2.field, p["detail"])
		}
		if detail, _ := p["detail"].(string); len(detail) > 1000 {
			t.Errorf("%.200s: a detail of %d bytes quotes the request back", c2.body, len(detail))
		}
	}

	// Another tenant: the session and its schedules do not exist.
	base := "/sessions/" + sid + "/schedules"
	other.do(http.MethodPost, base, map[string]any{"every": "30s", "messages": msgs}).expect(t, http.StatusNotFound)
	other.do(http.MethodGet, base, nil).expect(t, http.StatusNotFound)
	other.do(http.MethodGet, base+"/"+every.ScheduleID, nil).expect(t, http.StatusNotFound)
	other.do(http.MethodDelete, base+"/"+every.ScheduleID, nil).expect(t, http.StatusNotFound)
	c.do(http.MethodGet, base+"/sch_nope", nil).expect(t, http.StatusNotFound)

	c.do(http.MethodDelete, base+"/"+every.ScheduleID, nil).expect(t, http.StatusNoContent)
	c.do(http.MethodGet, base+"/"+every.ScheduleID, nil).expect(t, http.StatusNotFound)
	c.do(http.MethodDelete, base+"/"+every.ScheduleID, nil).expect(t, http.StatusNotFound)

	// Deleting the session deletes its schedules.
	c.do(http.MethodDelete, "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM schedules WHERE session_id = $1`, []any{sid}, &n)
	if n != 0 {
		t.Errorf("%d schedules left with their session deleted", n)
	}
}

// userMessage is a user message as a request carries it.
func userMessage(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// An "every: 1s" schedule on two replicas, one of them killed and started
// again meanwhile, starts one turn per tick: every tick from the first to
// the last is accounted for exactly once (a turn, or a skip), no tick has
// two turns, and once the schedule is deleted no tick starts another.
func TestScheduleTicksOnceAcrossReplicasAndRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL)
	b := startProc(t, dbURL)
	ca := &client{t: t, base: a.base, key: key}
	cb := &client{t: t, base: b.base, key: key}
	sid := ca.echoSession(nil)
	sc := ca.createSchedule(sid, map[string]any{"every": "1s", "messages": []any{userMessage("tick")}})
	first := *sc.NextRunAt

	waitFor(t, "the schedule's first turns", 15*time.Second, func() bool { return cb.getSchedule(sid, sc.ScheduleID).Runs >= 3 })
	a.kill()
	time.Sleep(1500 * time.Millisecond)
	a = startProc(t, dbURL)
	ca = &client{t: t, base: a.base, key: key}
	before := ca.getSchedule(sid, sc.ScheduleID).Runs
	waitFor(t, "more turns after the restart", 15*time.Second, func() bool { return ca.getSchedule(sid, sc.ScheduleID).Runs >= before+3 })
	b.kill()
	time.Sleep(1500 * time.Millisecond)
	b = startProc(t, dbURL)
	cb = &client{t: t, base: b.base, key: key}
	before = cb.getSchedule(sid, sc.ScheduleID).Runs
	waitFor(t, "more turns after the second restart", 15*time.Second, func() bool { return cb.getSchedule(sid, sc.ScheduleID).Runs >= before+3 })

	ca.do(http.MethodDelete, "/sessions/"+sid+"/schedules/"+sc.ScheduleID, nil).expect(t, http.StatusNoContent)
	// The schedule's last state, as the deletion found it, is gone with
	// it: count its ticks from its turns, each named by its tick.
	waitFor(t, "the schedule's turns to end", 30*time.Second, func() bool {
		for _, tr := range cb.sessionTurns(sid) {
			if tr.Status == "queued" || tr.Status == "running" {
				return false
			}
		}
		return true
	})
	turns := cb.sessionTurns(sid)
	time.Sleep(2500 * time.Millisecond)
	if after := cb.sessionTurns(sid); len(after) != len(turns) {
		t.Errorf("%d turns after the schedule's deletion, %d before", len(after), len(turns))
	}
	ticks := map[string]bool{}
	var last time.Time
	for _, tr := range turns {
		at, ok := strings.CutPrefix(tr.IdempotencyKey, sc.ScheduleID+"@")
		if !ok {
			t.Fatalf("turn %s has key %q, not the schedule's", tr.TurnID, tr.IdempotencyKey)
		}
		if ticks[at] {
			t.Errorf("tick %s started two turns", at)
		}
		ticks[at] = true
		if tr.Status != "completed" {
			t.Errorf("turn %s of tick %s: %s", tr.TurnID, at, tr.Status)
		}
		tick, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatal(err)
		}
		if d := tick.Sub(first); d < 0 || d%time.Second != 0 {
			t.Errorf("tick %s is not a tick of the schedule (first %s)", tick, first)
		}
		if tick.After(last) {
			last = tick
		}
	}
	// Every tick up to the last turn's either ran once or was skipped: the
	// echo turns take milliseconds, so skips are rare; missed ticks happen
	// only while no replica runs, which never happened.
	span := int(last.Sub(first)/time.Second) + 1
	if len(ticks) < span*2/3 {
		t.Errorf("%d ticks of %d from the first to the last started a turn", len(ticks), span)
	}
	history := cb.history(sid, "full")
	if users := strings.Count(fmt.Sprint(historyLines(history)), "user: tick"); users != len(turns) {
		t.Errorf("%d user messages stored for %d turns", users, len(turns))
	}
}

// A tick that comes while the schedule's previous turn still runs starts
// no turn: it is skipped, counted in the record and the metric.
func TestScheduleTickWhileItsTurnRunsIsSkippedAndCounted(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := srv.newTenant(t)
	sid := c.echoSession(nil)
	sc := c.createSchedule(sid, map[string]any{"every": "1s", "messages": []any{userMessage(slowWords(4, 1000))}})
	waitFor(t, "a tick skipped while its turn ran", 20*time.Second, func() bool { return c.getSchedule(sid, sc.ScheduleID).SkippedRunning >= 2 })
	c.do(http.MethodDelete, "/sessions/"+sid+"/schedules/"+sc.ScheduleID, nil).expect(t, http.StatusNoContent)
	if got := c.sessionTurns(sid); len(got) < 1 {
		t.Errorf("%d turns of the schedule, want at least 1", len(got))
	}
	// The in-process servers of this package share a database, and any of
	// their schedulers may fire this schedule's ticks, so this server's
	// metrics count only those its own scheduler fired: their values are
	// checked in a process of its own (TestScheduleTicksMissedWhileNoReplicaRan);
	// here, only that they are exported.
	metricValue(t, srv, "aapd_schedule_ticks_skipped_total", "reason", "running")
	metricValue(t, srv, "aapd_schedule_ticks_total", "", "")
}

// metricValue reads a counter of the server's registry (labelled name=value,
// or unlabelled with name "").
func metricValue(t *testing.T, srv *testServer, metric, label, value string) float64 {
	t.Helper()
	families, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label != "" && l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
			if label == "" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s=%q}", metric, label, value)
	return 0
}

// A tick missed while no replica ran: at start-up it runs once if it is
// less than one period late; of older ones, only the last (less than a
// period late) runs, the others are skipped and counted. The downtime is
// made by moving the schedule's next tick into the past while no process
// runs.
func TestScheduleTicksMissedWhileNoReplicaRan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a := startProc(t, dbURL, "--metrics-addr", metricsAddr)
	c := &client{t: t, base: a.base, key: key}
	sid := c.echoSession(nil)
	sc := c.createSchedule(sid, map[string]any{"every": "1h", "messages": []any{userMessage("hourly")}})
	if zero := metricText(t, metricsAddr); !strings.Contains(zero, `aapd_schedule_ticks_skipped_total{reason="missed"} 0`) ||
		!strings.Contains(zero, "aapd_schedule_ticks_total 0") {
		t.Errorf("the scheduler's metrics are not exported at zero")
	}
	a.kill()

	// Down for 20 minutes past the tick: less than one period late.
	storetest.Exec(t, dbURL, `UPDATE schedules SET next_run_at = now() - interval '20 minutes' WHERE id = $1`, sc.ScheduleID)
	a = startProc(t, dbURL)
	c = &client{t: t, base: a.base, key: key}
	waitFor(t, "the missed tick to run", 10*time.Second, func() bool { return c.getSchedule(sid, sc.ScheduleID).Runs == 1 })
	got := c.getSchedule(sid, sc.ScheduleID)
	if got.SkippedMissed != 0 || got.NextRunAt == nil || got.NextRunAt.Sub(*got.LastRunAt) != time.Hour || !got.NextRunAt.After(time.Now()) {
		t.Errorf("after a tick 20 minutes late: %+v", got)
	}
	// Its turn ends before the process goes: a turn still queued or
	// running at the next start would (rightly) skip the next tick.
	c.waitTurn(sid, got.LastTurnID)
	a.kill()

	// Down for three and a half hours: ticks 3h30, 2h30, 1h30 and 30 min
	// ago; the last runs, the three before it are skipped.
	storetest.Exec(t, dbURL, `UPDATE schedules SET next_run_at = now() - interval '210 minutes' WHERE id = $1`, sc.ScheduleID)
	a = startProc(t, dbURL, "--metrics-addr", metricsAddr)
	c = &client{t: t, base: a.base, key: key}
	waitFor(t, "the last missed tick to run", 10*time.Second, func() bool { return c.getSchedule(sid, sc.ScheduleID).Runs == 2 })
	got = c.getSchedule(sid, sc.ScheduleID)
	if got.SkippedMissed != 3 || got.SkippedRunning != 0 {
		t.Errorf("after three and a half hours down: %+v, want 3 missed", got)
	}
	if late := time.Since(*got.LastRunAt); late < 25*time.Minute || late > 35*time.Minute {
		t.Errorf("the tick that ran was %s ago, want the one 30 minutes ago", late)
	}
	if n := len(c.sessionTurns(sid)); n != 2 {
		t.Errorf("%d turns, want 2", n)
	}
	if m := metricText(t, metricsAddr); !strings.Contains(m, `aapd_schedule_ticks_skipped_total{reason="missed"} 3`) {
		t.Errorf("aapd_schedule_ticks_skipped_total{reason=\"missed\"} is not 3")
	}
}

// metricText is what /metrics at a process's --metrics-addr says.
func metricText(t *testing.T, addr string) string {
	t.Helper()
	return string((&client{t: t, base: "http://" + addr}).do(http.MethodGet, "/metrics", nil).expect(t, http.StatusOK).body)
}
