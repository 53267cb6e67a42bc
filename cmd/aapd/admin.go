package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("migrate", stderr)
	dbURL := databaseURLFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	res, err := store.MigrateReporting(ctx, *dbURL, func(m store.MigrationStep) {
		fmt.Fprintf(stderr, "applied %s (%s)\n", m.Name, m.Duration.Round(time.Millisecond)) // progress; the result goes to stdout
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %d migrations; schema version %d\n", len(res.Applied), res.Version)
	return nil
}

// openStore opens the database of an administration command.
func openStore(ctx context.Context, dbURL string) (*store.Store, error) {
	if err := requireDatabaseURL(dbURL); err != nil {
		return nil, err
	}
	return store.Open(ctx, store.Config{DatabaseURL: dbURL, MaxConns: 2})
}

func tenantsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{"tenants: want \"create NAME\" or \"list\""}
	}
	f := newFlagSet("tenants "+args[0], stderr)
	dbURL := databaseURLFlag(f)
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if f.NArg() != 1 || f.Arg(0) == "" {
			return &usageError{"tenants create: want exactly one NAME"}
		}
		st, err := openStore(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		t, err := st.TenantCreate(ctx, f.Arg(0))
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("tenant %q already exists", f.Arg(0))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\t%s\n", t.ID, t.Name)
		return nil
	case "list":
		if err := f.noArgs(); err != nil {
			return err
		}
		st, err := openStore(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		list, err := st.TenantList(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED")
		for _, t := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return &usageError{fmt.Sprintf("tenants: unknown subcommand %q (want create or list)", args[0])}
}

func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{"keys: want create, list or revoke"}
	}
	f := newFlagSet("keys "+args[0], stderr)
	dbURL := databaseURLFlag(f)
	tenant := f.String("tenant", "", "tenant (team) name")
	label := f.String("name", "", "a label for the key (create)")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	needTenant := func() error {
		if *tenant == "" {
			return &usageError{fmt.Sprintf("keys %s: --tenant NAME is required", args[0])}
		}
		return nil
	}
	switch args[0] {
	case "create":
		if err := needTenant(); err != nil {
			return err
		}
		st, err := openStore(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		t, err := tenantByName(ctx, st, *tenant)
		if err != nil {
			return err
		}
		key, err := createKey(ctx, st, t.ID, *label)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created API key %s for tenant %q; it is shown only this once:\n", key.PublicID, t.Name)
		fmt.Fprintln(stdout, key.Secret)
		return nil
	case "list":
		if err := needTenant(); err != nil {
			return err
		}
		st, err := openStore(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		t, err := tenantByName(ctx, st, *tenant)
		if err != nil {
			return err
		}
		keys, err := st.APIKeyList(ctx, t.ID)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tCREATED\tLAST USED\tREVOKED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.PublicID, auth.KeyPrefix+k.PublicID+"_…", orDash(k.Name),
				k.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(k.LastUsedAt), timeOrDash(k.RevokedAt))
		}
		return tw.Flush()
	case "revoke":
		if f.NArg() != 1 {
			return &usageError{"keys revoke: want exactly one key ID (see keys list)"}
		}
		st, err := openStore(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		k, err := st.APIKeyGetByPublicID(ctx, f.Arg(0))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no API key with id %q", f.Arg(0))
		}
		if err != nil {
			return err
		}
		if _, err := st.APIKeyRevoke(ctx, k.TenantID, k.PublicID); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "revoked API key %s\n", k.PublicID)
		return nil
	}
	return &usageError{fmt.Sprintf("keys: unknown subcommand %q (want create, list or revoke)", args[0])}
}

func tenantByName(ctx context.Context, st *store.Store, name string) (store.Tenant, error) {
	t, err := st.TenantGetByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Tenant{}, fmt.Errorf("no tenant named %q (see aapd tenants list)", name)
	}
	return t, err
}

// createKey generates a key for a tenant and stores its hash.
func createKey(ctx context.Context, st *store.Store, tenantID, label string) (auth.NewKey, error) {
	key, err := auth.GenerateKey()
	if err != nil {
		return auth.NewKey{}, fmt.Errorf("generate key: %w", err)
	}
	_, err = st.APIKeyCreate(ctx, store.APIKeyCreateParams{TenantID: tenantID, PublicID: key.PublicID, Hash: key.Hash, Name: label})
	return key, err
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
