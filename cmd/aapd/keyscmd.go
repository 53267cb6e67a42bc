package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/aapd/aapd/httpapi/admin"
)

func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "keys", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create": keysCreate, "list": keysList, "revoke": keysRevoke,
	}, "create, list or revoke")
}

// keysCreate prints a new key alone on stdout; it is never shown again.
func keysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("keys create", true, stderr)
	label := c.String("name", "", "a label for the key")
	scopes := c.String("scopes", strings.Join(admin.Scopes, ","), "comma-separated scopes the key holds: "+strings.Join(admin.Scopes, ", "))
	expiresIn := c.Duration("expires-in", 0, "the key stops working after this long, e.g. 720h (default: never)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	if *expiresIn < 0 {
		return &usageError{"keys create: --expires-in must be positive"}
	}
	req := admin.KeyRequest{Scopes: admin.ParseScopes(*scopes), Label: *label}
	if *expiresIn > 0 {
		at := time.Now().Add(*expiresIn).Truncate(time.Second)
		req.ExpiresAt = &at
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	k, err := svc.CreateKey(ctx, *c.tenant, req)
	if err != nil {
		return err
	}
	expiry := "never expires"
	if k.ExpiresAt != nil {
		expiry = "expires " + k.ExpiresAt.Format(time.RFC3339)
	}
	where := "it is shown only this once:"
	if !isTerminal(stdout) {
		// export AAPD_KEY=$(aapd keys create ...): the key went into the
		// variable (or the file, or the pipe), not onto the screen.
		where = "the key went to standard output (a pipe, a file or a variable, not this terminal); it is shown only this once"
	}
	fmt.Fprintf(stderr, "created API key %s for tenant %q (scopes %s; %s); %s\n",
		k.ID, *c.tenant, strings.Join(k.Scopes, ","), expiry, where)
	fmt.Fprintln(stdout, k.Secret)
	return nil
}

// isTerminal reports whether w is a terminal a person reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func keysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("keys list", true, stderr)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return printPages(stdout, []string{"ID", "PREFIX", "NAME", "SCOPES", "CREATED", "EXPIRES", "LAST USED", "REVOKED"},
		func(cursor string) ([]admin.Key, string, error) {
			page, err := svc.ListKeys(ctx, *c.tenant, cursor, admin.MaxPageLimit)
			return page.Keys, page.NextCursor, err
		},
		func(k admin.Key) []string {
			return []string{k.ID, k.Prefix + "…", orDash(k.Label), orDash(strings.Join(k.Scopes, ",")),
				k.CreatedAt.Format(time.RFC3339), timeOrDash(k.ExpiresAt), timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt)}
		})
}

// keysRevoke revokes a key by id; --tenant is optional, the id is unique.
func keysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("keys revoke", false, stderr)
	tenant := c.String("tenant", "", "the key's tenant (optional: found from the id)")
	if err := c.parse(args, 1, "key ID (see keys list)"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if *tenant == "" {
		if *tenant, err = svc.KeyTenant(ctx, c.Arg(0)); err != nil {
			return err
		}
	}
	k, err := svc.RevokeKey(ctx, *tenant, c.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "revoked API key %s\n", k.ID)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
