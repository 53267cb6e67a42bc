package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// The commands of an end user's rights (docs/lifecycle.md): aapd owners
// export writes everything an end user has in a tenant; aapd owners erase
// deletes it. An end user is a token's subject (sub).

func ownersCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "owners", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"export": ownersExport, "erase": ownersErase,
	}, `"export --tenant NAME SUB" or "erase --tenant NAME SUB"`)
}

// ownersExport writes the document of an end user's sessions.
func ownersExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("owners export", true, stderr)
	output := c.String("output", "", "write the document to this file instead of stdout")
	if err := c.parse(args, 1, "SUB (the end user's subject)"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var n int64
	err = writeDocument(*output, stdout, func(w io.Writer) error {
		n, err = svc.ExportOwner(ctx, *c.tenant, c.Arg(0), w, nil)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions of end user %q of tenant %q\n", n, c.Arg(0), *c.tenant)
	return nil
}

// ownersErase deletes every session of an end user and prints what it
// deleted (JSON, as the admin API answers).
func ownersErase(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("owners erase", true, stderr)
	if err := c.parse(args, 1, "SUB (the end user's subject)"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	e, err := svc.EraseOwner(ctx, *c.tenant, c.Arg(0))
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(b))
	return nil
}
