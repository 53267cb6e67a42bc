package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
)

func issuersCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "issuers", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"add": issuersAdd, "list": issuersList, "remove": issuersRemove,
	}, "add, list or remove")
}

// fileList is a repeatable flag naming files.
type fileList []string

func (l *fileList) String() string     { return fmt.Sprint(*l) }
func (l *fileList) Set(v string) error { *l = append(*l, v); return nil }

// issuersAdd registers an issuer and prints its id.
func issuersAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("issuers add", true, stderr)
	var req admin.IssuerRequest
	var keyFiles fileList
	c.StringVar(&req.Issuer, "issuer", "", "the tokens' iss claim")
	c.StringVar(&req.Audience, "audience", "", "the audience (aud claim) the tokens name")
	c.StringVar(&req.JWKSURL, "jwks-url", "", "where the issuer publishes its keys (https)")
	c.Var(&keyFiles, "public-key", "a PEM public key file the tokens are signed with (repeat for several; instead of --jwks-url)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	for _, f := range keyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return &usageError{fmt.Sprintf("--public-key: %v", err)}
		}
		req.PublicKeys = append(req.PublicKeys, string(b))
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	i, err := svc.AddIssuer(ctx, *c.tenant, req)
	var refused *admin.Error
	var n int
	if errors.As(err, &refused) && refused.Kind == admin.Invalid {
		// A refused key is named by its file: the service knows it as
		// publicKeys[n], the nth --public-key.
		if _, scanErr := fmt.Sscanf(refused.Field, "publicKeys[%d]", &n); scanErr == nil && n >= 0 && n < len(keyFiles) {
			return &usageError{fmt.Sprintf("--public-key %s: %s", keyFiles[n], refused.Msg)}
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, i.ID)
	return nil
}

func issuersList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("issuers list", true, stderr)
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return printPages(stdout, []string{"ID", "ISSUER", "AUDIENCE", "KEYS", "CREATED"},
		func(cursor string) ([]admin.Issuer, string, error) {
			page, err := svc.ListIssuers(ctx, *c.tenant, cursor, admin.MaxPageLimit)
			return page.Issuers, page.NextCursor, err
		},
		func(i admin.Issuer) []string {
			keys := i.JWKSURL
			if keys == "" {
				keys = strconv.Itoa(len(i.PublicKeys)) + " PEM"
			}
			return []string{i.ID, i.Issuer, i.Audience, keys, i.CreatedAt.Format(time.RFC3339)}
		})
}

func issuersRemove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("issuers remove", true, stderr)
	if err := c.parse(args, 1, "issuer ID (see issuers list)"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if err := svc.RemoveIssuer(ctx, *c.tenant, c.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "removed issuer %s\n", c.Arg(0))
	return nil
}
