package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The commands that move sessions and tenants as export documents
// (docs/lifecycle.md): aapd sessions export|import, aapd tenants
// export|import. Documents go to stdout (or --output) and come from a file
// (or stdin); what the command did goes to stderr.

func sessionsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "sessions", args, stdout, stderr, map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"export": sessionsExport, "import": sessionsImport,
	}, `"export ID" or "import [FILE]"`)
}

// sessionsExport writes a session's document.
func sessionsExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("sessions export", true, stderr).withKey()
	output := c.String("output", "", "write the document to this file instead of stdout")
	if err := c.parse(args, 1, "session ID"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	return writeDocument(*output, stdout, func(w io.Writer) error {
		return svc.ExportSession(ctx, *c.tenant, c.Arg(0), w)
	})
}

// sessionsImport creates a session from a document and prints its id.
func sessionsImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("sessions import", true, stderr).withKey()
	owner := c.String("owner", "", "the end user (a token's subject) the session belongs to (default: the owner the document names)")
	file, err := c.parseDocumentArg(args)
	if err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var ownerp *string
	if c.given("owner") {
		ownerp = owner
	}
	return readDocument(file, func(r io.Reader) error {
		id, err := svc.ImportSession(ctx, *c.tenant, ownerp, r)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, id)
		return nil
	})
}

// tenantsExport writes a tenant's document, saying on stderr how far it is.
func tenantsExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("tenants export", false, stderr).withKey()
	output := c.String("output", "", "write the document to this file instead of stdout")
	if err := c.parse(args, 1, "NAME"); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	start, last := time.Now(), time.Now()
	var n int64
	err = writeDocument(*output, stdout, func(w io.Writer) error {
		n, err = svc.ExportTenant(ctx, c.Arg(0), w, func(string) {
			if n++; time.Since(last) > 5*time.Second {
				last = time.Now()
				fmt.Fprintf(stderr, "exported %d sessions of tenant %q\n", n, c.Arg(0))
			}
		})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported tenant %q: %d sessions in %s\n", c.Arg(0), n, time.Since(start).Round(time.Millisecond))
	return nil
}

// tenantsImport creates a tenant from a document and prints its id and
// name.
func tenantsImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("tenants import", false, stderr).withKey()
	name := c.String("name", "", "name the tenant this instead of the name the document holds")
	file, err := c.parseDocumentArg(args)
	if err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	start := time.Now()
	return readDocument(file, func(r io.Reader) error {
		t, n, err := svc.ImportTenant(ctx, r, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "imported tenant %q: %d sessions in %s\n", t.Name, n, time.Since(start).Round(time.Millisecond))
		fmt.Fprintf(stdout, "%s\t%s\n", t.ID, t.Name)
		return nil
	})
}

// parseDocumentArg parses an import's command line: at most one
// positional argument, the document's file ("-" or none: stdin).
func (c *adminCmd) parseDocumentArg(args []string) (string, error) {
	if err := c.flagSet.parse(args); err != nil {
		return "", err
	}
	if c.NArg() > 1 {
		return "", &usageError{fmt.Sprintf("%s: want at most one FILE (none or \"-\": stdin)", c.name)}
	}
	if c.tenant != nil && *c.tenant == "" {
		return "", &usageError{c.name + ": --tenant NAME is required"}
	}
	return c.Arg(0), nil
}

// given reports whether a flag was set on the command line or from its
// environment variable.
func (c *adminCmd) given(name string) bool {
	set := false
	c.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// writeDocument runs write on stdout, or on a file it creates next to
// output and renames to it once the document is whole: a failed export
// leaves no file that looks like one.
func writeDocument(output string, stdout io.Writer, write func(io.Writer) error) error {
	if output == "" || output == "-" {
		return write(stdout)
	}
	f, err := os.CreateTemp(filepath.Dir(output), filepath.Base(output)+".*.partial")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), output)
}

// readDocument runs read on the file, or stdin for "" and "-".
func readDocument(file string, read func(io.Reader) error) error {
	if file == "" || file == "-" {
		return read(os.Stdin)
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f)
}
