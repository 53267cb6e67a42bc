package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
)

func webhooksCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "webhooks", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create": webhooksCreate, "list": webhooksList, "get": webhooksGet, "delete": webhooksDelete,
		"rotate-secret": webhooksRotateSecret, "enable": webhooksEnable,
		"deliveries": webhooksDeliveries, "redeliver": webhooksRedeliver,
	}, "create, list, get, delete, rotate-secret, enable, deliveries or redeliver")
}

// webhooksCreate registers an endpoint and prints its id and its secret,
// which is shown this once.
func webhooksCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("webhooks create", true, stderr).withEncryptionKey()
	var req admin.WebhookRequest
	c.StringVar(&req.URL, "url", "", "where the events are POSTed (https)")
	events := c.String("events", "", "comma-separated event types: turn.completed, turn.failed, turn.requires_action, session.deleted")
	c.StringVar(&req.Description, "description", "", "what the endpoint is for, for people")
	allowPrivate := c.Bool("webhook-allow-private", false, "admit loopback and private addresses, and http (as the servers must, to send there)")
	c.fromEnv("webhook-allow-private", "AAPD_WEBHOOK_ALLOW_PRIVATE")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	req.Events = admin.ParseList(*events)
	svc, err := c.service(ctx, func(cfg *admin.Config) { cfg.WebhookAllowPrivate = *allowPrivate })
	if err != nil {
		return err
	}
	defer c.close()
	wh, err := svc.CreateWebhook(ctx, *c.tenant, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, wh.ID, wh.Secret)
	return nil
}

func webhooksList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("webhooks list", true, stderr)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return printPages(stdout, []string{"ID", "URL", "EVENTS", "STATE", "CREATED"},
		func(cursor string) ([]admin.Webhook, string, error) {
			page, err := svc.ListWebhooks(ctx, *c.tenant, cursor, admin.MaxPageLimit)
			return page.Webhooks, page.NextCursor, err
		},
		func(w admin.Webhook) []string {
			return []string{w.ID, w.URL, strings.Join(w.Events, ","), w.State, w.CreatedAt.Format(time.RFC3339)}
		})
}

// webhookByID runs a subcommand that names a webhook (and, for more, other
// arguments: want in all, described by what): it parses the command line,
// opens the service, and hands both to do.
func webhookByID(ctx context.Context, name string, args []string, stderr io.Writer, want int, what string,
	withKey bool, do func(svc *admin.Service, c *adminCmd) error) error {
	c := newAdminCmd("webhooks "+name, true, stderr)
	if withKey {
		c.withEncryptionKey()
	}
	if err := c.parse(args, want, what); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return do(svc, c)
}

const webhookArg = "webhook ID (see webhooks list)"

// webhooksGet prints an endpoint as the admin API shows it (JSON).
func webhooksGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return webhookByID(ctx, "get", args, stderr, 1, webhookArg, false, func(svc *admin.Service, c *adminCmd) error {
		wh, err := svc.GetWebhook(ctx, *c.tenant, c.Arg(0))
		if err != nil {
			return err
		}
		return printJSON(stdout, wh)
	})
}

func webhooksDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return webhookByID(ctx, "delete", args, stderr, 1, webhookArg, false, func(svc *admin.Service, c *adminCmd) error {
		if err := svc.DeleteWebhook(ctx, *c.tenant, c.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "deleted webhook %s with its deliveries\n", c.Arg(0))
		return nil
	})
}

// webhooksRotateSecret prints the endpoint's new secret.
func webhooksRotateSecret(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return webhookByID(ctx, "rotate-secret", args, stderr, 1, webhookArg, true, func(svc *admin.Service, c *adminCmd) error {
		wh, err := svc.RotateWebhookSecret(ctx, *c.tenant, c.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, wh.Secret)
		fmt.Fprintf(stderr, "the previous secret signs beside it until %s\n", wh.PreviousSecretExpiresAt.Format(time.RFC3339))
		return nil
	})
}

func webhooksEnable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return webhookByID(ctx, "enable", args, stderr, 1, webhookArg, false, func(svc *admin.Service, c *adminCmd) error {
		if _, err := svc.EnableWebhook(ctx, *c.tenant, c.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "enabled webhook %s\n", c.Arg(0))
		return nil
	})
}

// webhooksDeliveries prints an endpoint's newest deliveries, one a line,
// with their last attempt.
func webhooksDeliveries(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("webhooks deliveries", true, stderr)
	limit := c.Int("limit", admin.DefaultPageLimit, "how many of the newest deliveries to show")
	if err := c.parse(args, 1, webhookArg); err != nil {
		return err
	}
	if *limit < 1 {
		return &usageError{"webhooks deliveries: --limit must be at least 1"}
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	shown := 0
	return printPages(stdout, []string{"EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST ATTEMPT", "NEXT"},
		func(cursor string) ([]admin.Delivery, string, error) {
			page, err := svc.ListDeliveries(ctx, *c.tenant, c.Arg(0), cursor, min(*limit-shown, admin.MaxPageLimit))
			shown += len(page.Deliveries)
			if shown >= *limit {
				page.NextCursor = ""
			}
			return page.Deliveries, page.NextCursor, err
		},
		func(d admin.Delivery) []string {
			last, next := "-", "-"
			if n := len(d.Attempts); n > 0 {
				a := d.Attempts[n-1]
				last = a.At.Format(time.RFC3339) + " " + strconv.Itoa(a.StatusCode) + " " + strconv.FormatInt(a.LatencyMS, 10) + "ms"
				if a.Error != "" {
					last += " " + a.Error
				}
			}
			if d.NextAttemptAt != nil {
				next = d.NextAttemptAt.Format(time.RFC3339)
			}
			return []string{d.EventID, d.EventType, d.State, strconv.Itoa(len(d.Attempts)), last, next}
		})
}

func webhooksRedeliver(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return webhookByID(ctx, "redeliver", args, stderr, 2, "webhook ID and one event ID (see webhooks deliveries)", false,
		func(svc *admin.Service, c *adminCmd) error {
			if _, err := svc.Redeliver(ctx, *c.tenant, c.Arg(0), c.Arg(1)); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "event %s is due again at webhook %s\n", c.Arg(1), c.Arg(0))
			return nil
		})
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
