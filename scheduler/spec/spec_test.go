package spec

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRefusesWithTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cron, tz string
		every    time.Duration
		field    string
	}{
		{"", "", 0, "cron"},
		{"* * * * *", "", time.Second, "every"},
		{"", "Europe/Berlin", time.Second, "timezone"},
		{"", "", 999 * time.Millisecond, "every"},
		{"", "", 1500 * time.Microsecond, "every"},
		{"", "", 2*time.Second + time.Microsecond, "every"},
		{"* * * *", "", 0, "cron"},
		{"61 * * * *", "", 0, "cron"},
		{"@every 5s", "", 0, "cron"},
		{"TZ=UTC * * * * *", "", 0, "cron"},
		{"0 0 30 2 *", "", 0, "cron"},
		{"0 9 * * 1-5", "Mars/Olympus", 0, "timezone"},
		{"0 9 * * 1-5", "Local", 0, "timezone"},
		// Bounds, before the cron parser (which would take them all).
		{"0" + strings.Repeat(",0", 50_000) + " * * * *", "", 0, "cron"},
		{strings.Repeat("0,", MaxCronListItems) + "1 * * * *", "", 0, "cron"},
		{"0 9 * * *" + strings.Repeat(" ", MaxCronLength), "", 0, "cron"},
		{"0 9 * * *", strings.Repeat("Europe/", 10) + "Berlin", 0, "timezone"},
	}
	for _, c := range cases {
		_, err := Parse(c.cron, c.tz, c.every)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Parse(%q, %q, %s) = %v, want a refusal of %q", c.cron, c.tz, c.every, err, c.field)
		}
	}
	for _, s := range []string{"1s", "30s", "1h30m"} {
		d, err := ParseEveryText(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse("", "", d); err != nil {
			t.Errorf("every %s: %v", s, err)
		}
	}
	// At the bounds: every value of every field listed is a cron
	// expression; so is a field of MaxCronListItems items.
	all := func(from, to int) string {
		var v []string
		for i := from; i <= to; i++ {
			v = append(v, strconv.Itoa(i))
		}
		return strings.Join(v, ",")
	}
	for _, expr := range []string{
		strings.Join([]string{all(0, 59), all(0, 23), all(1, 31), all(1, 12), all(0, 6)}, " "),
		strings.TrimSuffix(strings.Repeat("0,", MaxCronListItems), ",") + " 9 * * *",
	} {
		if len(expr) > MaxCronLength {
			t.Fatalf("%d bytes: the bound refuses an expression it means to take", len(expr))
		}
		if _, err := Parse(expr, "", 0); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
	if _, err := Parse("0 9 * * *", "America/Argentina/Buenos_Aires", 0); err != nil {
		t.Errorf("a long IANA name refused: %v", err)
	}
	for _, s := range []string{"", "soon", "-5s", "0s", strings.Repeat("0", MaxEveryLength) + "1s"} {
		if _, err := ParseEveryText(s); err == nil {
			t.Errorf("every %q accepted", s)
		}
	}
}

// A cron expression is read in its time zone, across a change of summer
// time.
func TestCronTicksInItsTimeZone(t *testing.T) {
	t.Parallel()
	spec, err := Parse("0 9 * * 1-5", "Europe/Berlin", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Friday 2026-03-27 10:00 UTC: next is Monday 30 March 09:00 CEST (07:00 UTC).
	got := spec.Next(time.Date(2026, 3, 27, 10, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next = %s, want %s", got, want)
	}
	// In winter, 09:00 CET is 08:00 UTC.
	got = spec.Next(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next = %s, want %s", got, want)
	}
}

// The rule of missed ticks: of the ticks due, the last runs if it is less
// than one period late; the others are skipped and counted.
func TestDueRunsTheLastTickLessThanAPeriodLate(t *testing.T) {
	t.Parallel()
	every, _ := Parse("", "", 10*time.Second)
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	end := t0.Add(25 * time.Second)
	cases := []struct {
		name     string
		spec     Spec
		due, now time.Time
		end      *time.Time
		want     Tick
	}{
		{"on time", every, t0, t0.Add(300 * time.Millisecond), nil,
			Tick{Run: true, At: t0, Next: t0.Add(10 * time.Second)}},
		{"late, less than a period", every, t0, t0.Add(9 * time.Second), nil,
			Tick{Run: true, At: t0, Next: t0.Add(10 * time.Second)}},
		{"three periods down: the last runs, two skipped", every, t0, t0.Add(25 * time.Second), nil,
			Tick{Run: true, At: t0.Add(20 * time.Second), Missed: 2, Next: t0.Add(30 * time.Second)}},
		{"down past its end: the last before the end is a period late", every, t0, t0.Add(40 * time.Second), &end,
			Tick{Missed: 3}},
		{"down until just after its end: the last runs, then it ends", every, t0, t0.Add(26 * time.Second), &end,
			Tick{Run: true, At: t0.Add(20 * time.Second), Missed: 2}},
		{"its last tick", every, t0.Add(20 * time.Second), t0.Add(21 * time.Second), &end,
			Tick{Run: true, At: t0.Add(20 * time.Second)}},
	}
	for _, c := range cases {
		got := c.spec.Due(c.due, c.now, c.end)
		if got.Run != c.want.Run || !got.At.Equal(c.want.At) || got.Missed != c.want.Missed || !got.Next.Equal(c.want.Next) {
			t.Errorf("%s: Due = %+v, want %+v", c.name, got, c.want)
		}
	}

	daily, err := Parse("0 9 * * *", "UTC", 0)
	if err != nil {
		t.Fatal(err)
	}
	nine := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	got := daily.Due(nine, nine.Add(3*24*time.Hour+time.Hour), nil)
	want := Tick{Run: true, At: nine.Add(3 * 24 * time.Hour), Missed: 3, Next: nine.Add(4 * 24 * time.Hour)}
	if got != want {
		t.Errorf("daily, three days down: Due = %+v, want %+v", got, want)
	}
}

// FuzzScheduleSpec feeds a schedule's timing as a client sends it. The
// property: no input panics; a refusal names a member of the request; an
// accepted timing ticks forward, and what a due tick does follows the
// rule of missed ticks (the tick that runs is at most a period late, the
// next tick is after now).
func FuzzScheduleSpec(f *testing.F) {
	f.Add("0 9 * * 1-5", "Europe/Berlin", "", int64(90))
	f.Add("", "", "30s", int64(3600))
	f.Add("@daily", "", "", int64(86400*3))
	f.Add("*/5 * * * *", "America/New_York", "", int64(1))
	f.Fuzz(func(t *testing.T, cronExpr, tz, every string, lateSeconds int64) {
		var d time.Duration
		if every != "" {
			var err error
			if d, err = ParseEveryText(every); err != nil {
				return
			}
		}
		sp, err := Parse(cronExpr, tz, d)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || (fe.Field != "cron" && fe.Field != "timezone" && fe.Field != "every") {
				t.Fatalf("refusal %v names no member", err)
			}
			return
		}
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		first := sp.First(now)
		if !first.After(now) {
			t.Fatalf("first tick %s is not after %s", first, now)
		}
		late := time.Duration(lateSeconds%(400*86400)) * time.Second
		if late < 0 {
			late = -late
		}
		at := first.Add(late)
		tick := sp.Due(first, at, nil)
		if tick.Run && (tick.At.After(at) || tick.At.Before(first)) {
			t.Fatalf("the tick run, %s, is not between the due %s and now %s", tick.At, first, at)
		}
		if !tick.Next.IsZero() && !tick.Next.After(at) {
			t.Fatalf("the next tick %s is not after now %s", tick.Next, at)
		}
		if tick.Run && !tick.Next.IsZero() && tick.Next.Sub(tick.At) <= 0 {
			t.Fatalf("next %s before the tick run %s", tick.Next, tick.At)
		}
	})
}
