package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// flagSet is a flag.FlagSet whose flags may also come from environment
// variables: a flag given on the command line wins over its variable.
type flagSet struct {
	*flag.FlagSet
	env map[string]string // flag name -> environment variable
}

func newFlagSet(name string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &flagSet{FlagSet: fs, env: map[string]string{}}
}

// fromEnv binds flag name to environment variable env, and says so in the
// flag's help.
func (f *flagSet) fromEnv(name, env string) {
	f.env[name] = env
	if fl := f.Lookup(name); fl != nil {
		fl.Usage += " [$" + env + "]"
	}
}

// parse parses args, then fills the flags not given from the environment.
func (f *flagSet) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return &usageError{err.Error()}
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for name, env := range f.env {
		v, ok := os.LookupEnv(env)
		if !ok || given[name] || strings.TrimSpace(v) == "" {
			continue
		}
		if err := f.Set(name, v); err != nil {
			return &usageError{fmt.Sprintf("$%s: %v", env, err)}
		}
	}
	return nil
}

// databaseURLFlag defines the --database-url flag every command shares.
func databaseURLFlag(f *flagSet) *string {
	u := f.String("database-url", "", "Postgres connection URL, e.g. postgres://user@localhost:5432/aapd")
	f.fromEnv("database-url", "DATABASE_URL")
	return u
}

func requireDatabaseURL(u string) error {
	if u == "" {
		return &usageError{"no database: set --database-url or $DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/aapd?sslmode=disable)"}
	}
	return nil
}
