package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store"
)

// The administration commands (tenants, keys, issuers, limits, usage,
// webhooks) call
// the same admin.Service as the admin HTTP API: one validation, one audit
// line per change (on stderr, with actor "cli": the server's JSON line).

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("migrate", stderr)
	dbURL := databaseURLFlag(f)
	migrateURL := migrateURLFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if err := checkMigrateURL(*migrateURL); err != nil {
		return err
	}
	u := cmp.Or(*migrateURL, *dbURL)
	if err := requireDatabaseURL(u); err != nil {
		return err
	}
	res, err := store.MigrateReporting(ctx, u, func(m store.MigrationStep) {
		fmt.Fprintf(stderr, "applied %s (%s)\n", m.Name, m.Duration.Round(time.Millisecond)) // progress; the result goes to stdout
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %d migrations; schema version %d\n", len(res.Applied), res.Version)
	return nil
}

// openStore opens the database of an administration command; key seals
// secrets (nil: the database's own key, as for a server without one).
func openStore(ctx context.Context, dbURL string, key []byte) (*store.Store, error) {
	if err := requireDatabaseURL(dbURL); err != nil {
		return nil, err
	}
	return store.Open(ctx, store.Config{DatabaseURL: dbURL, MaxConns: 2, EncryptionKey: key})
}

// adminCmd is what every administration command shares: its flags (the
// database, and --tenant when it takes one), and the service it calls.
type adminCmd struct {
	*flagSet
	name   string
	dbURL  *string
	tenant *string
	// key is --encryption-key, for the commands that read or store secrets
	// (withKey); nil for the others.
	key    *string
	stderr io.Writer
	st     *store.Store
}

// withEncryptionKey adds --encryption-key: a command that stores a secret
// seals it with the servers' key.
func (c *adminCmd) withEncryptionKey() *adminCmd {
	c.key = encryptionKeyFlag(c.flagSet)
	return c
}

// newAdminCmd defines the flags of an administration command; withTenant
// adds --tenant.
func newAdminCmd(name string, withTenant bool, stderr io.Writer) *adminCmd {
	c := &adminCmd{flagSet: newFlagSet(name, stderr), name: name, stderr: stderr}
	c.dbURL = databaseURLFlag(c.flagSet)
	if withTenant {
		c.tenant = c.String("tenant", "", "tenant (team) name")
	}
	return c
}

// withKey adds --encryption-key: the command reads sessions' secrets.
func (c *adminCmd) withKey() *adminCmd {
	c.key = encryptionKeyFlag(c.flagSet)
	return c
}

// parse parses the command line, checks that --tenant is given and the
// positional arguments number want.
func (c *adminCmd) parse(args []string, want int, what string) error {
	if err := c.flagSet.parse(args); err != nil {
		return err
	}
	if c.NArg() != want {
		if want == 0 {
			return c.noArgs()
		}
		return &usageError{fmt.Sprintf("%s: want exactly one %s", c.name, what)}
	}
	if c.tenant != nil && *c.tenant == "" {
		return &usageError{c.name + ": --tenant NAME is required"}
	}
	return nil
}

// service opens the database and returns the operator's service over it
// (edit adjusts its configuration); its audit lines go to stderr. Close
// the command when done.
func (c *adminCmd) service(ctx context.Context, edit ...func(*admin.Config)) (*admin.Service, error) {
	var key []byte
	if c.key != nil {
		var err error
		if key, err = decodeEncryptionKey(*c.key); err != nil {
			return nil, err
		}
	}
	st, err := openStore(ctx, *c.dbURL, key)
	if err != nil {
		return nil, err
	}
	c.st = st
	cfg := admin.Config{Store: st, Logger: newLogger(c.stderr, slog.LevelInfo), Actor: "cli"}
	for _, e := range edit {
		e(&cfg)
	}
	return admin.NewService(cfg), nil
}

func (c *adminCmd) close() {
	if c.st != nil {
		c.st.Close()
	}
}

// cliError turns a refusal of the service into the CLI's: bad input is a
// usage error (exit 2), anything else exit 1, each one line, naming the
// flag the user typed where the service names a field of the admin API.
func cliError(err error) error {
	var refused *admin.Error
	if !errors.As(err, &refused) {
		return err
	}
	msg := fieldsAsFlags.Replace(refused.Msg)
	if f := flagOf(refused.Field); f != "" {
		msg = f + ": " + msg
	}
	if refused.Kind == admin.Invalid {
		return &usageError{msg}
	}
	return errors.New(msg)
}

// flagOfField names, for each field of the admin API's requests, the CLI's
// flag that sets it; "" for a positional argument the message names itself
// (a tenant's name).
var flagOfField = map[string]string{
	"name": "", "label": "--name", "scopes": "--scopes", "expiresAt": "--expires-in",
	"issuer": "--issuer", "audience": "--audience", "jwksUrl": "--jwks-url", "publicKeys": "--public-key",
	"requestsPerSecond": "--rps", "burst": "--burst", "maxRunningTurns": "--max-running-turns",
	"from": "--from", "to": "--to", "sub": "SUB",
	"idleSessionDays": "--idle-session-days", "fullHistoryDays": "--full-history-days",
}

// fieldsAsFlags rewrites the fields a refusal's text mentions (the camel
// case ones, which no prose holds) as flags; and a flag has no null.
var fieldsAsFlags = strings.NewReplacer("requestsPerSecond", "--rps", "maxRunningTurns", "--max-running-turns",
	"jwksUrl", "--jwks-url", "publicKeys", "--public-key", "expiresAt", "--expires-in", "0 or null:", "0:",
	"or null for the server's default", "or 0 for the server's default")

// flagOf is the flag of a refused field: scopes[1] is --scopes.
func flagOf(field string) string {
	name, _, _ := strings.Cut(field, "[")
	if f, ok := flagOfField[name]; ok {
		return f
	}
	return field
}

// subcommand dispatches a command group's subcommands.
func subcommand(ctx context.Context, group string, args []string, stdout, stderr io.Writer,
	cmds map[string]func(context.Context, []string, io.Writer, io.Writer) error, names string) error {
	if len(args) == 0 {
		return &usageError{fmt.Sprintf("%s: want %s", group, names)}
	}
	if isHelp(args[0]) {
		printGroupUsage(stdout, group)
		return nil
	}
	run, ok := cmds[args[0]]
	if !ok {
		return &usageError{fmt.Sprintf("%s: unknown subcommand %q (want %s)", group, args[0], names)}
	}
	return cliError(run(ctx, args[1:], stdout, stderr))
}

// printPages writes a table to out: its header's columns, then a row for
// each item of every page, fetching page after page until the last (a
// page's next cursor is empty on the last).
func printPages[T any](out io.Writer, header []string, page func(cursor string) (items []T, next string, err error), row func(T) []string) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for cursor := ""; ; {
		items, next, err := page(cursor)
		if err != nil {
			return err
		}
		for _, it := range items {
			fmt.Fprintln(tw, strings.Join(row(it), "\t"))
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	return tw.Flush()
}
