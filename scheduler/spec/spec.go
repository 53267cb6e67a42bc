// Package spec reads when a schedule ticks (docs/background.md#schedules):
// a five-field cron expression in a time zone (parsed by robfig/cron), or a
// fixed interval; and decides what a schedule whose tick is due does now,
// by the rule of missed ticks (Spec.Due). It is pure: no I/O.
package spec

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones even where the system has no tz database

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest interval of an "every" schedule.
const MinEvery = time.Second

// maxEvery bounds an "every" schedule's interval (a year).
const maxEvery = 366 * 24 * time.Hour

// Bounds on a schedule's text, checked before it is parsed, stored or
// quoted back in a refusal: without them a client could store a cron
// expression of a 100 KB list ("0,0,0,…"), which the cron parser accepts
// and every replica would read again at each tick.
const (
	// MaxCronLength is the longest cron expression: room to write every
	// value of every field out as a list (356 bytes), with its spaces.
	MaxCronLength = 512
	// MaxCronListItems bounds the comma-separated items of one field: the
	// minute field has 60 values; more items can only repeat them.
	MaxCronListItems = 60
	// MaxTimezoneLength is the longest time zone name (the IANA names
	// have at most 32 bytes).
	MaxTimezoneLength = 64
	// MaxEveryLength is the longest "every" text ("1h30m", "8760h").
	MaxEveryLength = 64
	// MaxMessagesBytes bounds a schedule's turn (its "messages", as
	// JSON): a prompt, stored with the schedule and appended to the
	// history at every tick — an "every": "1s" schedule of a turn's full
	// body size would write megabytes a second.
	MaxMessagesBytes = 64 << 10
)

// cronParser reads the five standard fields (minute, hour, day of month,
// month, day of week) and the descriptors (@daily, @hourly…), as crontab
// does. Seconds are not a field: "every" is for periods under a minute.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// FieldError is a schedule's definition refused: Field names the member of
// the request at fault.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Spec is when a schedule ticks: a cron expression in a time zone, or a
// fixed interval.
type Spec struct {
	cron  cron.Schedule
	loc   *time.Location
	every time.Duration
}

// Parse reads a schedule's timing: cronExpr in timezone ("" for UTC), or
// every. Exactly one of cronExpr and every is set; timezone goes with cron.
// Its errors are *FieldError.
func Parse(cronExpr, timezone string, every time.Duration) (Spec, error) {
	switch {
	case cronExpr == "" && every == 0:
		return Spec{}, &FieldError{"cron", `a schedule needs "cron" (with an optional "timezone") or "every"`}
	case cronExpr != "" && every != 0:
		return Spec{}, &FieldError{"every", `a schedule has "cron" or "every", not both`}
	case every != 0:
		if timezone != "" {
			return Spec{}, &FieldError{"timezone", `"timezone" goes with "cron": an "every" schedule ticks at fixed intervals from its creation`}
		}
		return ParseEvery(every)
	}
	spec := Spec{loc: time.UTC}
	if err := checkCronText(cronExpr); err != nil {
		return Spec{}, err
	}
	if timezone != "" {
		if len(timezone) > MaxTimezoneLength {
			return Spec{}, &FieldError{"timezone", fmt.Sprintf("has %d bytes, more than the longest time zone name may have (%d)", len(timezone), MaxTimezoneLength)}
		}
		if timezone == "Local" {
			return Spec{}, &FieldError{"timezone", `"Local" names the server's zone; name an IANA time zone, such as "Europe/Berlin"`}
		}
		loc, err := time.LoadLocation(timezone)
		if err != nil {
			return Spec{}, &FieldError{"timezone", fmt.Sprintf("unknown time zone %q: name an IANA time zone, such as \"Europe/Berlin\" or \"UTC\"", timezone)}
		}
		spec.loc = loc
	}
	expr := strings.TrimSpace(cronExpr)
	switch {
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return Spec{}, &FieldError{"cron", `name the time zone in "timezone", not in the expression`}
	case strings.HasPrefix(expr, "@every"):
		return Spec{}, &FieldError{"cron", `use "every" for a fixed interval (e.g. "every": "30s")`}
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return Spec{}, &FieldError{"cron", fmt.Sprintf("%q is not a cron expression of five fields (minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\"): %v", cronExpr, err)}
	}
	spec.cron = sched
	if spec.Next(time.Now()).IsZero() {
		return Spec{}, &FieldError{"cron", fmt.Sprintf("%q never fires", cronExpr)}
	}
	return spec, nil
}

// checkCronText refuses a cron expression longer than MaxCronLength, or
// with a field listing more than MaxCronListItems items, before the cron
// parser reads it.
func checkCronText(expr string) error {
	if len(expr) > MaxCronLength {
		return &FieldError{"cron", fmt.Sprintf("has %d bytes, more than the longest cron expression may have (%d)", len(expr), MaxCronLength)}
	}
	for i, field := range strings.Fields(expr) {
		if n := strings.Count(field, ",") + 1; n > MaxCronListItems {
			return &FieldError{"cron", fmt.Sprintf("field %d lists %d items, more than a field may list (%d)", i+1, n, MaxCronListItems)}
		}
	}
	return nil
}

// ParseEvery reads an "every" schedule's interval: at least MinEvery, in
// whole milliseconds.
func ParseEvery(every time.Duration) (Spec, error) {
	switch {
	case every < MinEvery:
		return Spec{}, &FieldError{"every", fmt.Sprintf("%s is shorter than the shortest interval, %s", every, MinEvery)}
	case every > maxEvery:
		return Spec{}, &FieldError{"every", fmt.Sprintf("%s is longer than the longest interval, %s (use \"cron\")", every, maxEvery)}
	case every%time.Millisecond != 0:
		return Spec{}, &FieldError{"every", fmt.Sprintf("%s is not a whole number of milliseconds", every)}
	}
	return Spec{every: every}, nil
}

// ParseEveryText reads the "every" member of a request: a Go duration
// ("30s", "1h30m").
func ParseEveryText(s string) (time.Duration, error) {
	if len(s) > MaxEveryLength {
		return 0, &FieldError{"every", fmt.Sprintf("has %d bytes, more than a duration such as \"1h30m\" needs (at most %d)", len(s), MaxEveryLength)}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, &FieldError{"every", fmt.Sprintf("%q is not a duration such as \"30s\", \"5m\" or \"1h30m\"", s)}
	}
	return d, nil
}

// Next returns the first tick after t; the zero time if there is none
// (a cron expression that no date in the next five years matches).
func (s Spec) Next(t time.Time) time.Time {
	if s.cron == nil {
		return t.Add(s.every)
	}
	next := s.cron.Next(t.In(s.loc))
	if next.IsZero() {
		return next
	}
	return next.UTC()
}

// First returns a new schedule's first tick, created at now: an "every"
// schedule's one interval after it, a cron schedule's first match after it.
func (s Spec) First(now time.Time) time.Time { return s.Next(now) }

// Tick is what a due schedule does at now (Spec.Due).
type Tick struct {
	// Run is true when a tick runs now: At.
	Run bool
	At  time.Time
	// Missed counts the due ticks skipped: each older than the one that
	// runs, or, when none runs, every one due (they are more than a period
	// late, or the schedule ended before them).
	Missed int
	// Next is the next tick, after now; zero when the schedule has ended
	// (endAt is before it, or the cron expression matches no later date).
	Next time.Time
}

// maxCatchUp bounds the ticks of a cron schedule walked to find the last
// one due: a schedule missed for longer skips its walk to now.
const maxCatchUp = 1 << 20

// Due decides what a schedule whose next tick is due (at or before now)
// does: of the ticks due, up to end (nil: no end), the last runs if it is
// less than one period late (the next tick after it is still to come); the
// others are skipped and counted missed. So a tick missed while no replica
// ran is run once at start-up if it is less than one period late, and
// skipped and counted if it is more.
func (s Spec) Due(due, now time.Time, end *time.Time) Tick {
	until := now
	if end != nil && end.Before(now) {
		until = *end
	}
	var t Tick
	if due.After(until) {
		// The schedule ended before its due tick: none runs.
		return t
	}
	last, n := s.lastDue(due, until)
	following := s.Next(last)
	if !following.IsZero() && !following.After(now) {
		// Even the last due tick is a period late: none runs.
		t.Missed = n + 1
	} else {
		t.Run, t.At, t.Missed = true, last, n
	}
	// The last tick due is the last at or before now (or the end): the
	// one after it is the next.
	t.Next = following
	if s.every == 0 || !t.Next.After(now) {
		t.Next = s.Next(now)
	}
	if end != nil && t.Next.After(*end) {
		t.Next = time.Time{}
	}
	return t
}

// lastDue returns the last tick at or before until, from due (itself a
// tick at or before until), and how many ticks come before it.
func (s Spec) lastDue(due, until time.Time) (last time.Time, before int) {
	if s.every != 0 {
		k := until.Sub(due) / s.every
		return due.Add(k * s.every), int(k)
	}
	last = due
	for i := 0; i < maxCatchUp; i++ {
		n := s.Next(last)
		if n.IsZero() || n.After(until) {
			return last, before
		}
		last, before = n, before+1
	}
	return last, before
}
