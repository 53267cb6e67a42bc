package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
)

func tenantsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "tenants", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create": tenantsCreate, "list": tenantsList, "delete": tenantsDelete, "export": tenantsExport, "import": tenantsImport,
	}, `"create NAME", "list", "delete NAME", "export NAME" or "import [FILE]"`)
}

// tenantsCreate prints the new tenant's id and name.
func tenantsCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("tenants create", false, stderr)
	if err := c.parse(args, 1, "NAME"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	t, err := svc.CreateTenant(ctx, c.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\t%s\n", t.ID, t.Name)
	return nil
}

func tenantsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("tenants list", false, stderr)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return printPages(stdout, []string{"ID", "NAME", "CREATED"},
		func(cursor string) ([]admin.Tenant, string, error) {
			page, err := svc.ListTenants(ctx, cursor, admin.MaxPageLimit)
			return page.Tenants, page.NextCursor, err
		},
		func(t admin.Tenant) []string { return []string{t.ID, t.Name, t.CreatedAt.Format(time.RFC3339)} })
}

// tenantsDelete deletes a tenant with its sessions, keys and issuers.
func tenantsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("tenants delete", false, stderr)
	if err := c.parse(args, 1, "NAME"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if err := svc.DeleteTenant(ctx, c.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "deleted tenant %q with its sessions, keys and issuers\n", c.Arg(0))
	return nil
}
