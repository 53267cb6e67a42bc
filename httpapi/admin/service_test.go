package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store/storetest"
)

// Audit lines are written whatever the log level: quieting the logs must
// not quiet the audit trail.
func TestServiceAuditsAtAnyLogLevel(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	svc := admin.NewService(admin.Config{Store: storetest.Open(t), Actor: "test",
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	name := uniqueName("quiet")
	if _, err := svc.CreateTenant(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"msg":"audit","action":"tenant.create","actor":"test","tenant":"`+name+`"`) {
		t.Errorf("logs %q", logs.String())
	}
}

// The service's refusals are *admin.Error of a kind, for the HTTP API and
// the CLI alike.
func TestServiceRefusals(t *testing.T) {
	t.Parallel()
	svc := admin.NewService(admin.Config{Store: storetest.Open(t)})
	ctx := context.Background()
	name := uniqueName("kinds")
	if _, err := svc.CreateTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		kind admin.ErrorKind
	}{
		{func() error { _, err := svc.CreateTenant(ctx, name); return err }(), admin.Conflict},
		{func() error { _, err := svc.CreateTenant(ctx, "no/slash"); return err }(), admin.Invalid},
		{func() error { _, err := svc.CreateKey(ctx, uniqueName("none"), admin.KeyRequest{}); return err }(), admin.NotFound},
		{func() error { _, err := svc.CreateKey(ctx, name, admin.KeyRequest{Scopes: []string{"x"}}); return err }(), admin.Invalid},
		{func() error { _, err := svc.ListTenants(ctx, "", 500); return err }(), admin.Invalid},
		{func() error { _, err := svc.Usage(ctx, name, "2025-01-02", "2025-01-01"); return err }(), admin.Invalid},
		{svc.RemoveIssuer(ctx, name, "iss_nope"), admin.NotFound},
	} {
		var e *admin.Error
		if !errors.As(tc.err, &e) || e.Kind != tc.kind {
			t.Errorf("%v: want an *admin.Error of kind %d", tc.err, tc.kind)
		}
	}
}
