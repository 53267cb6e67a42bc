package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/retention"
	"github.com/aapd/aapd/store"
)

// retentionFlags defines the server's default retention policy
// (--retention-idle-session-days, --retention-full-history-days): serve
// applies it, and the retention commands show and sweep by it, so that an
// operator's environment gives both the same.
func retentionFlags(f *flagSet, r *store.TenantRetention) {
	f.IntVar(&r.IdleSessionDays, "retention-idle-session-days", 0, "default days a session may stay idle (no turn, no change) before the retention sweeper deletes it (0: forever)")
	f.fromEnv("retention-idle-session-days", "AAPD_RETENTION_IDLE_SESSION_DAYS")
	f.IntVar(&r.FullHistoryDays, "retention-full-history-days", 0, "default days full-history messages a compaction summarised are kept (0: forever)")
	f.fromEnv("retention-full-history-days", "AAPD_RETENTION_FULL_HISTORY_DAYS")
}

// checkRetention refuses a default retention policy out of range.
func checkRetention(r store.TenantRetention) error {
	if r.IdleSessionDays < 0 || r.IdleSessionDays > admin.MaxRetentionDays || r.FullHistoryDays < 0 || r.FullHistoryDays > admin.MaxRetentionDays {
		return &usageError{fmt.Sprintf("--retention-idle-session-days and --retention-full-history-days must be from 0 (forever) to %d", admin.MaxRetentionDays)}
	}
	return nil
}

func retentionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "retention", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"set": retentionSet, "show": retentionShow, "sweep": retentionSweep,
	}, "set, show or sweep")
}

// retentionSet replaces a tenant's retention policy: a flag left out (or
// 0) is the server's default, as a null is in the admin API.
func retentionSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("retention set", true, stderr)
	var defaults store.TenantRetention
	retentionFlags(c.flagSet, &defaults)
	idle := c.Int("idle-session-days", 0, "days a session may stay idle before it is deleted (0: the server's default)")
	full := c.Int("full-history-days", 0, "days full-history messages a compaction summarised are kept (0: the server's default)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	if err := checkRetention(defaults); err != nil {
		return err
	}
	req := admin.RetentionRequest{}
	if *idle != 0 {
		v := float64(*idle)
		req.IdleSessionDays = &v
	}
	if *full != 0 {
		v := float64(*full)
		req.FullHistoryDays = &v
	}
	svc, err := c.service(ctx, func(cfg *admin.Config) { cfg.Retention = defaults })
	if err != nil {
		return err
	}
	defer c.close()
	r, err := svc.SetRetention(ctx, *c.tenant, req)
	if err != nil {
		return err
	}
	printRetention(stdout, r)
	return nil
}

func retentionShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("retention show", true, stderr)
	var defaults store.TenantRetention
	retentionFlags(c.flagSet, &defaults)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	if err := checkRetention(defaults); err != nil {
		return err
	}
	svc, err := c.service(ctx, func(cfg *admin.Config) { cfg.Retention = defaults })
	if err != nil {
		return err
	}
	defer c.close()
	r, err := svc.GetRetention(ctx, *c.tenant)
	if err != nil {
		return err
	}
	printRetention(stdout, r)
	return nil
}

// printRetention prints each period in force a line, with where it comes
// from: "90 days (tenant)", "30 days (default)", "forever".
func printRetention(w io.Writer, r admin.Retention) {
	show := func(days *int, from string) string {
		if days == nil {
			return "forever"
		}
		return strconv.Itoa(*days) + " days (" + from + ")"
	}
	fmt.Fprintf(w, "idle sessions\t%s\nfull history\t%s\n",
		show(r.Effective.IdleSessionDays, r.Effective.IdleSessionDaysFrom),
		show(r.Effective.FullHistoryDays, r.Effective.FullHistoryDaysFrom))
}

// retentionSweep runs one retention sweep over every tenant, as the
// sweeper of aapd serve does, and prints what it deleted.
func retentionSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("retention sweep", false, stderr)
	var defaults store.TenantRetention
	retentionFlags(c.flagSet, &defaults)
	once := c.Bool("once", false, "run one sweep and exit (required: aapd serve runs the sweeps on a schedule)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	if !*once {
		return &usageError{"retention sweep: --once is required (aapd serve sweeps every --retention-interval)"}
	}
	if err := checkRetention(defaults); err != nil {
		return err
	}
	if _, err := c.service(ctx); err != nil {
		return err
	}
	defer c.close()
	s := retention.New(retention.Config{Store: c.st, Logger: newLogger(stderr, slog.LevelInfo), Defaults: defaults})
	defer s.Stop()
	res, err := s.Sweep(ctx)
	if errors.Is(err, store.ErrRetentionBusy) {
		return fmt.Errorf("another process is sweeping now; its sweep applies the same policies")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sessions deleted\t%d\nmessages deleted\t%d\nsessions trimmed\t%d\nmessages trimmed\t%d\n",
		res.Sessions, res.Messages, res.Trimmed, res.TrimmedMessages)
	return nil
}
