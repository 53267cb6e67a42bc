package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// usageCmd prints a tenant's turns and tokens per day and agent, and the
// totals.
func usageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newAdminCmd("usage", true, stderr)
	from := c.String("from", "", "start: RFC 3339 or YYYY-MM-DD (default: 30 days before --to)")
	to := c.String("to", "", "end: RFC 3339, or YYYY-MM-DD to include that day (default: today included)")
	if err := c.parse(args, 0, ""); err != nil {
		return err
	}
	svc, err := c.service(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	u, err := svc.Usage(ctx, *c.tenant, *from, *to)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "usage of tenant %q from %s to %s (UTC)\n", u.Tenant, u.From.Format(time.RFC3339), u.To.Format(time.RFC3339))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tAGENT\tTURNS\tINPUT TOKENS\tOUTPUT TOKENS")
	for _, d := range u.Days {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", d.Date, d.Agent, d.Turns, d.InputTokens, d.OutputTokens)
	}
	fmt.Fprintf(tw, "total\t-\t%d\t%d\t%d\n", u.Totals.Turns, u.Totals.InputTokens, u.Totals.OutputTokens)
	return tw.Flush()
}
