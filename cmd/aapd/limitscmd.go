package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/aapd/aapd/httpapi/admin"
)

func limitsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "limits", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"set": limitsSet, "show": limitsShow,
	}, "set or show")
}

// limitsSet replaces a tenant's limits: a flag left out (or 0) is the
// server's default, as a null is in the admin API.
func limitsSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("limits set", true, stderr)
	rps := c.Float64("rps", 0, "requests per second (0: the server's default)")
	burst := c.Int("burst", 0, "requests that may come at once above the rate (at least 1 with --rps; 0: the server's default)")
	turns := c.Int("max-running-turns", 0, "turns that may run at once (0: the server's default)")
	queued := c.Int("max-queued-turns", 0, "background turns that may wait for a worker (0: the server's default)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	l, err := svc.SetLimits(ctx, *c.tenant, admin.Limits{RequestsPerSecond: rps, Burst: burst, MaxRunningTurns: turns, MaxQueuedTurns: queued})
	if err != nil {
		return err
	}
	printLimits(stdout, l)
	return nil
}

func limitsShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("limits show", true, stderr)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	t, err := svc.GetTenant(ctx, *c.tenant)
	if err != nil {
		return err
	}
	printLimits(stdout, t.Limits)
	return nil
}

// printLimits prints one limit a line; "default" for the server's.
func printLimits(w io.Writer, l admin.Limits) {
	show := func(v string, set bool) string {
		if !set {
			return "default"
		}
		return v
	}
	var rps, burst, turns, queued string
	if l.RequestsPerSecond != nil {
		rps = strconv.FormatFloat(*l.RequestsPerSecond, 'g', -1, 64)
	}
	if l.Burst != nil {
		burst = strconv.Itoa(*l.Burst)
	}
	if l.MaxRunningTurns != nil {
		turns = strconv.Itoa(*l.MaxRunningTurns)
	}
	if l.MaxQueuedTurns != nil {
		queued = strconv.Itoa(*l.MaxQueuedTurns)
	}
	fmt.Fprintf(w, "requests per second\t%s\nburst\t%s\nmax running turns\t%s\nmax queued turns\t%s\n",
		show(rps, l.RequestsPerSecond != nil), show(burst, l.Burst != nil), show(turns, l.MaxRunningTurns != nil),
		show(queued, l.MaxQueuedTurns != nil))
}
