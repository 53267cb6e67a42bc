// Command aapd is the aapd server and its administration tool: it serves
// AAP v3, migrates its database, and manages tenants and API keys.
//
//	aapd serve [flags]                          run the server (migrates first)
//	aapd migrate [--database-url URL]           apply migrations and exit
//	aapd tenants create|list|delete             manage teams
//	aapd tenants export|import                  move a tenant with its sessions
//	aapd sessions export|import                 move one session
//	aapd owners export|erase                    an end user's data: a copy, or erasure
//	aapd keys create|list|revoke                manage a tenant's API keys
//	aapd issuers add|list|remove                manage a tenant's token issuers
//	aapd limits set|show                        a tenant's quotas
//	aapd retention set|show|sweep               a tenant's retention policy; one sweep
//	aapd usage --tenant NAME                    a tenant's turns and tokens
//	aapd webhooks create|list|get|delete|...    manage a tenant's webhooks
//	aapd healthcheck [--url URL]                probe a server (container health checks)
//	aapd version                                print version, revision and Go version
//
// The administration commands call the same code as the admin HTTP API
// (package httpapi/admin).
//
// Errors print one line on stderr and exit non-zero.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aapd/aapd/store"
)

const usage = `aapd: a multi-tenant server for the Agent Application Protocol (AAP v3)

Usage:
  aapd serve [flags]                              run the server (migrates the database first)
  aapd migrate [--database-url URL]               apply database migrations and exit
  aapd tenants create NAME                        create a tenant (a team)
  aapd tenants list                               list tenants
  aapd tenants delete NAME                        delete a tenant with its sessions, keys and issuers
  aapd tenants export NAME [--output FILE]        write a tenant's document: limits, issuers and every session (never its keys)
  aapd tenants import [--name NEW] [FILE]         create a tenant from its document (FILE or stdin); prints its id and name
  aapd sessions export --tenant NAME ID [--output FILE]
                                                  write one session's document (JSON Lines, docs/lifecycle.md)
  aapd sessions import --tenant NAME [--owner SUB] [FILE]
                                                  create a session from its document (FILE or stdin); prints its id
  aapd owners export --tenant NAME SUB [--output FILE]
                                                  write every session of an end user (a token's sub) as a tenant document
  aapd owners erase --tenant NAME SUB             delete every session of an end user, with all that names them; prints the counts
  aapd keys create --tenant NAME [--name LABEL] [--scopes sessions:read,sessions:write] [--expires-in 720h]
                                                  create an API key; prints it alone on stdout
  aapd keys list --tenant NAME                    list a tenant's API keys, with scopes and expiry
  aapd keys revoke ID                             revoke an API key by its id
  aapd issuers add --tenant NAME --issuer ISS --audience AUD (--jwks-url URL | --public-key FILE...)
                                                  register an issuer of end-user tokens; prints its id
  aapd issuers list --tenant NAME                 list a tenant's token issuers
  aapd issuers remove --tenant NAME ID            remove a token issuer
  aapd limits set --tenant NAME [--rps N --burst N] [--max-running-turns N]
                                                  replace a tenant's limits (left out: the server's default)
  aapd limits show --tenant NAME                  show a tenant's limits
  aapd retention set --tenant NAME [--idle-session-days N] [--full-history-days N]
                                                  replace a tenant's retention policy (left out: the server's default)
  aapd retention show --tenant NAME               show the retention policy in force for a tenant, and where it comes from
  aapd retention sweep --once                     run one retention sweep over every tenant; prints what it deleted
  aapd usage --tenant NAME [--from DATE] [--to DATE]
                                                  turns and tokens per day and agent (default: last 30 days)
  aapd webhooks create --tenant NAME --url URL --events TYPE,... [--description TEXT]
                                                  register a webhook endpoint; prints its id and secret (shown once)
  aapd webhooks list --tenant NAME                list a tenant's webhook endpoints
  aapd webhooks get --tenant NAME ID              show a webhook endpoint (JSON)
  aapd webhooks delete --tenant NAME ID           delete a webhook endpoint with its deliveries
  aapd webhooks rotate-secret --tenant NAME ID    print a new secret; the old one signs beside it for 24 h
  aapd webhooks enable --tenant NAME ID           enable a disabled webhook endpoint again
  aapd webhooks deliveries --tenant NAME ID [--limit N]
                                                  an endpoint's newest deliveries and their last attempts
  aapd webhooks redeliver --tenant NAME ID EVENT_ID
                                                  send an event to the endpoint again (same id and body)
  aapd healthcheck [--url URL]                    exit 0 if the server at URL answers 200 (for containers)
  aapd version                                    print the version, VCS revision and Go version (also --version)

The same administration is served over HTTP under /admin/v1 when aapd serve
is given an operator token ($AAPD_ADMIN_TOKEN or --admin-token-file; docs/tenancy.md).

Run "aapd COMMAND -h" for a command's flags. Every flag can also be set from
the environment variable shown in its help (DATABASE_URL, AAPD_ADDR, ...).
`

func main() {
	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "aapd:", err)
		}
		os.Exit(exitCode(err))
	}
}

// stopSignal is the cause of a context that a signal ended: serve tells an
// operator's SIGTERM from a person's Ctrl-C (SIGINT) by it.
type stopSignal struct{ os.Signal }

func (s stopSignal) Error() string { return s.String() + " signal received" }

// interrupted reports whether ctx ended by an interrupt: Ctrl-C in a
// terminal.
func interrupted(ctx context.Context) bool {
	var s stopSignal
	return errors.As(context.Cause(ctx), &s) && s.Signal == os.Interrupt
}

// notifyContext is signal.NotifyContext, whose cause is the stopSignal
// received. Its goroutine ends with the context: on the signal, or at stop.
func notifyContext(parent context.Context, signals ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, signals...)
	go func() {
		select {
		case s := <-ch:
			cancel(stopSignal{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0 // asked for the usage, and got it
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// run dispatches a command line; stdout carries only a command's result.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return withHint(dispatch(ctx, args, stdout, stderr))
}

// withHint adds to a failure what the user can do about it, where the
// failure itself cannot know (the store does not know the CLI's flags).
func withHint(err error) error {
	if errors.Is(err, store.ErrNoDatabase) {
		return fmt.Errorf("%w: `aapd serve --create-database` creates it (make run does), or create it yourself (createdb)", err)
	}
	return err
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stderr)
	case "migrate":
		return migrateCmd(ctx, rest, stdout, stderr)
	case "tenants":
		return tenantsCmd(ctx, rest, stdout, stderr)
	case "sessions":
		return sessionsCmd(ctx, rest, stdout, stderr)
	case "owners":
		return ownersCmd(ctx, rest, stdout, stderr)
	case "keys":
		return keysCmd(ctx, rest, stdout, stderr)
	case "issuers":
		return issuersCmd(ctx, rest, stdout, stderr)
	case "limits":
		return limitsCmd(ctx, rest, stdout, stderr)
	case "retention":
		return retentionCmd(ctx, rest, stdout, stderr)
	case "usage":
		return cliError(usageCmd(ctx, rest, stdout, stderr))
	case "webhooks":
		return webhooksCmd(ctx, rest, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, rest, stderr)
	case "version", "--version":
		return versionCmd(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return &usageError{fmt.Sprintf("unknown command %q: run \"aapd help\" for the commands", cmd)}
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// printGroupUsage prints the lines of the usage that are about cmd: "aapd
// tenants -h" lists the tenants subcommands.
func printGroupUsage(w io.Writer, cmd string) {
	fmt.Fprintf(w, "Usage of aapd %s:\n", cmd)
	for _, line := range strings.Split(usage, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "aapd "+cmd+" ") {
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "\nRun \"aapd %s SUBCOMMAND -h\" for a subcommand's flags.\n", cmd)
}
