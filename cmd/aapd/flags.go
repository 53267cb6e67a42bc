package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aapd/aapd/store"
)

// flagSet is a flag.FlagSet whose flags may also come from environment
// variables: a flag given on the command line wins over its variable.
type flagSet struct {
	*flag.FlagSet
	env    map[string]string // flag name -> environment variable
	args   []string          // positional arguments
	stderr io.Writer         // where -h prints the usage
}

// NArg is the number of positional arguments.
func (f *flagSet) NArg() int { return len(f.args) }

// Arg is the i-th positional argument, or "".
func (f *flagSet) Arg(i int) string {
	if i < len(f.args) {
		return f.args[i]
	}
	return ""
}

// noArgs refuses positional arguments for commands that take none.
func (f *flagSet) noArgs() error {
	if len(f.args) > 0 {
		return &usageError{fmt.Sprintf("%s: unexpected argument %q", f.Name(), f.args[0])}
	}
	return nil
}

func newFlagSet(name string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints the error and the whole usage on any
	// mistake; aapd prints the usage on -h only, and a mistake as one line
	// with a hint (parse).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, env: map[string]string{}, stderr: stderr}
}

// printUsage prints the flags of the command, for -h.
func (f *flagSet) printUsage() {
	fmt.Fprintf(f.stderr, "Usage of aapd %s:\n", f.Name())
	f.SetOutput(f.stderr)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// fromEnv binds flag name to environment variable env, and says so in the
// flag's help.
func (f *flagSet) fromEnv(name, env string) {
	f.env[name] = env
	if fl := f.Lookup(name); fl != nil {
		fl.Usage += " [$" + env + "]"
	}
}

// parse parses args, flags and positional arguments in any order (so that
// "tenants create acme --database-url URL" works), then fills the flags not
// given from the environment. Positional arguments are in f.args.
//
// A variable set to the empty string is set: for a text flag it means the
// empty value (AAPD_CORS_ORIGINS="" allows no origin, where leaving it
// unset keeps the default "*"). Only for a flag that cannot be empty — a
// number, a duration, a switch — does a blank variable leave the default.
func (f *flagSet) parse(args []string) error {
	for {
		if err := f.Parse(args); err != nil {
			if err == flag.ErrHelp {
				f.printUsage()
				return err
			}
			return &usageError{fmt.Sprintf("%s: %v (see aapd %s -h)", f.Name(), err, f.Name())}
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			f.args = append(f.args, args[1:]...)
			break
		}
		f.args = append(f.args, args[0])
		args = args[1:]
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for name, env := range f.env {
		v, ok := os.LookupEnv(env)
		if !ok || given[name] || (strings.TrimSpace(v) == "" && !isText(f.Lookup(name))) {
			continue
		}
		if err := f.Set(name, v); err != nil {
			return &usageError{fmt.Sprintf("$%s: %v", env, err)}
		}
	}
	return nil
}

// isText reports whether a flag holds text, for which empty is a value.
func isText(fl *flag.Flag) bool {
	if g, ok := fl.Value.(flag.Getter); ok {
		_, text := g.Get().(string)
		return text
	}
	return false
}

// databaseURLFlag defines the --database-url flag every command shares.
func databaseURLFlag(f *flagSet) *string {
	u := f.String("database-url", "", "Postgres connection URL, e.g. postgres://user@localhost:5432/aapd")
	f.fromEnv("database-url", "DATABASE_URL")
	return u
}

// migrateURLFlag defines --migrate-database-url, the URL migrations run
// with: the tables' owner, where the server's own URL (--database-url) logs
// in as a role that only reads and writes (docs/operations.md). Empty: the
// server's URL, which then must be the owner's.
func migrateURLFlag(f *flagSet) *string {
	u := f.String("migrate-database-url", "", "Postgres connection URL of the tables' owner, for migrating (default: --database-url)")
	f.fromEnv("migrate-database-url", "AAPD_MIGRATE_DATABASE_URL")
	return u
}

// checkMigrateURL refuses a malformed --migrate-database-url; an empty one
// is fine (the server's URL migrates).
func checkMigrateURL(u string) error {
	if u == "" {
		return nil
	}
	if err := store.CheckDatabaseURL(u); err != nil {
		return &usageError{fmt.Sprintf("--migrate-database-url (or $AAPD_MIGRATE_DATABASE_URL): %v (e.g. %s)", err, exampleDatabaseURL)}
	}
	return nil
}

// requireDatabaseURL refuses a missing or malformed database URL as a
// usage mistake (exit 2), before anything connects.
func requireDatabaseURL(u string) error {
	if u == "" {
		return &usageError{"no database: set --database-url or $DATABASE_URL (e.g. " + exampleDatabaseURL + ")"}
	}
	if err := store.CheckDatabaseURL(u); err != nil {
		return &usageError{fmt.Sprintf("--database-url (or $DATABASE_URL): %v (e.g. %s)", err, exampleDatabaseURL)}
	}
	return nil
}

const exampleDatabaseURL = "postgres://postgres@127.0.0.1:5432/aapd?sslmode=disable"

// encryptionKeyFlag defines --encryption-key ($AAPD_ENCRYPTION_KEY), which
// seals secrets at rest (secret options, webhook secrets): serve and the
// commands that read or store them (export, import, webhooks) share it;
// decodeEncryptionKey reads it.
func encryptionKeyFlag(f *flagSet) *string {
	k := f.String("encryption-key", "", "base64 of 32 random bytes sealing secrets at rest (openssl rand -base64 32); the same on every process")
	f.fromEnv("encryption-key", "AAPD_ENCRYPTION_KEY")
	return k
}

// decodeEncryptionKey decodes --encryption-key; nil when it is empty.
func decodeEncryptionKey(v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != 32 {
		return nil, &usageError{"--encryption-key must be the base64 of exactly 32 bytes (openssl rand -base64 32)"}
	}
	return b, nil
}
