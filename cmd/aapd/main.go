// Command aapd is the aapd server and its administration tool: it serves
// AAP v3, migrates its database, and manages tenants and API keys.
//
//	aapd serve [flags]                          run the server (migrates first)
//	aapd migrate [--database-url URL]           apply migrations and exit
//	aapd tenants create NAME | tenants list     manage teams
//	aapd keys create --tenant NAME [--name L]   print a new API key on stdout
//	aapd keys list --tenant NAME                list a tenant's keys
//	aapd keys revoke ID                         revoke a key
//	aapd healthcheck [--url URL]                probe a server (container health checks)
//	aapd version                                print version, revision and Go version
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
	"syscall"
)

const usage = `aapd: a multi-tenant server for the Agent Application Protocol (AAP v3)

Usage:
  aapd serve [flags]                              run the server (migrates the database first)
  aapd migrate [--database-url URL]               apply database migrations and exit
  aapd tenants create NAME                        create a tenant (a team)
  aapd tenants list                               list tenants
  aapd keys create --tenant NAME [--name LABEL]   create an API key; prints it alone on stdout
  aapd keys list --tenant NAME                    list a tenant's API keys
  aapd keys revoke ID                             revoke an API key by its id
  aapd healthcheck [--url URL]                    exit 0 if the server at URL answers 200 (for containers)
  aapd version                                    print the version, VCS revision and Go version (also --version)

Run "aapd COMMAND -h" for a command's flags. Every flag can also be set from
the environment variable shown in its help (DATABASE_URL, AAPD_ADDR, ...).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "aapd:", err)
		}
		os.Exit(exitCode(err))
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
	case "keys":
		return keysCmd(ctx, rest, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, rest, stderr)
	case "version", "--version":
		return versionCmd(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}
