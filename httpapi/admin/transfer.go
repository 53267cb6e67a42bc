package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/transfer"
)

// An operator moves sessions and tenants as export documents
// (docs/lifecycle.md): from plain PostgreSQL onto Citus, between
// deployments, out of a support queue. An operator's documents carry the
// sessions' secret option values sealed with the server's encryption key,
// so a server with the same key takes them back; a tenant's own exports
// (the AAP API) never do.

// ExportTenant writes a tenant's document to out: its limits, retention, token
// issuers and every session, never its API keys. done is called after each
// session (progress).
func (s *Service) ExportTenant(ctx context.Context, name string, out io.Writer, done func(sessionID string)) (int64, error) {
	t, err := s.tenant(ctx, name)
	if err != nil {
		return 0, err
	}
	issuers, err := s.st.TokenIssuerList(ctx, t.ID)
	if err != nil {
		return 0, err
	}
	doc := transfer.Tenant{Name: t.Name, CreatedAt: t.CreatedAt.UTC()}
	l := limitsOf(t.Limits)
	doc.Limits = transfer.Limits{RequestsPerSecond: l.RequestsPerSecond, Burst: l.Burst, MaxRunningTurns: l.MaxRunningTurns}
	r := retentionOf(t.Retention, store.TenantRetention{})
	doc.Retention = transfer.Retention{IdleSessionDays: r.IdleSessionDays, FullHistoryDays: r.FullHistoryDays}
	for _, i := range issuers {
		doc.Issuers = append(doc.Issuers, transfer.Issuer{Issuer: i.Issuer, Audience: i.Audience, JWKSURL: i.JWKSURL, PublicKeys: i.PublicKeys})
	}
	n, err := transfer.WriteTenant(ctx, out, s.st, t.ID, doc, transfer.WriteOptions{Sealed: true}, done)
	if err != nil {
		return n, fmt.Errorf("export tenant %q: %w", name, err)
	}
	s.audit(ctx, "tenant.export", t, t.ID, slog.Int64("sessions", n))
	return n, nil
}

// ImportTenant creates a tenant from a tenant document read from r, named
// name (the document's name when empty), with its limits, retention, issuers and
// sessions, each keeping its owner. It is all or nothing: on any error the
// tenant it created is deleted again. A document that breaks a rule is
// Invalid, naming the line and the rule.
func (s *Service) ImportTenant(ctx context.Context, r io.Reader, name string) (Tenant, int64, error) {
	imp := &tenantImporter{Store: s.st, svc: s, name: name}
	id, n, err := transfer.ReadTenant(ctx, r, imp, transfer.ReadOptions{Sealed: true})
	if err != nil {
		if id != "" {
			if derr := s.st.TenantDelete(context.WithoutCancel(ctx), id); derr != nil {
				err = fmt.Errorf("%w (and removing the tenant it created failed: %v)", err, derr)
			}
		}
		return Tenant{}, 0, importError(err)
	}
	t, err := s.st.TenantGet(ctx, id)
	if err != nil {
		return Tenant{}, n, err
	}
	s.audit(ctx, "tenant.import", t, t.ID, slog.Int64("sessions", n))
	return tenantOf(t), n, nil
}

// tenantImporter creates a tenant document's tenant through the service
// (its validation and audit lines), and imports its sessions into the store.
type tenantImporter struct {
	*store.Store
	svc  *Service
	name string
}

func (ti *tenantImporter) CreateTenant(ctx context.Context, t transfer.Tenant) (string, error) {
	name := ti.name
	if name == "" {
		name = t.Name
	}
	created, err := ti.svc.CreateTenant(ctx, name)
	if err != nil {
		return "", err
	}
	l := Limits{RequestsPerSecond: t.Limits.RequestsPerSecond, Burst: t.Limits.Burst, MaxRunningTurns: t.Limits.MaxRunningTurns}
	if l != (Limits{}) {
		if _, err := ti.svc.SetLimits(ctx, name, l); err != nil {
			return created.ID, fmt.Errorf("the tenant's limits: %w", err)
		}
	}
	if r := t.Retention; r != (transfer.Retention{}) {
		req := RetentionRequest{}
		if r.IdleSessionDays != nil {
			v := float64(*r.IdleSessionDays)
			req.IdleSessionDays = &v
		}
		if r.FullHistoryDays != nil {
			v := float64(*r.FullHistoryDays)
			req.FullHistoryDays = &v
		}
		if _, err := ti.svc.SetRetention(ctx, name, req); err != nil {
			return created.ID, fmt.Errorf("the tenant's retention: %w", err)
		}
	}
	for _, i := range t.Issuers {
		if _, err := ti.svc.AddIssuer(ctx, name, IssuerRequest{Issuer: i.Issuer, Audience: i.Audience, JWKSURL: i.JWKSURL, PublicKeys: i.PublicKeys}); err != nil {
			return created.ID, fmt.Errorf("the tenant's issuer %q: %w", i.Issuer, err)
		}
	}
	return created.ID, nil
}

// ExportSession writes one session's document to out, its secret values
// sealed.
func (s *Service) ExportSession(ctx context.Context, tenant, sessionID string, out io.Writer) error {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return err
	}
	if !store.ValidID("sess_", sessionID) {
		return notFound("tenant %q has no session %q", tenant, sessionID)
	}
	_, err = transfer.WriteSession(ctx, out, s.st, store.SessionExportParams{TenantID: t.ID, SessionID: sessionID}, transfer.WriteOptions{Sealed: true})
	if errors.Is(err, store.ErrNotFound) {
		return notFound("tenant %q has no session %q", tenant, sessionID)
	}
	if err != nil {
		return exportError(err)
	}
	s.audit(ctx, "session.export", t, sessionID)
	return nil
}

// ImportSession creates a session of a tenant from a session document read
// from r, and returns its id. Its owner is owner, or with nil the one the
// document names.
func (s *Service) ImportSession(ctx context.Context, tenant string, owner *string, r io.Reader) (string, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return "", err
	}
	opts := transfer.ReadOptions{TenantID: t.ID, Sealed: true, OwnerFromDocument: owner == nil}
	if owner != nil {
		opts.Owner = *owner
	}
	sess, err := transfer.ReadSession(ctx, r, s.st, opts)
	if err != nil {
		return "", importError(err)
	}
	s.audit(ctx, "session.import", t, sess.ID)
	return sess.ID, nil
}

// importError makes a document's broken rule the operator's mistake.
func importError(err error) error {
	var line *transfer.LineError
	switch {
	case errors.As(err, &line):
		return invalid("document", "%s", line.Error())
	case errors.Is(err, store.ErrSealedElsewhere):
		return invalid("document", "%v: import with the exporting server's AAPD_ENCRYPTION_KEY", err)
	}
	return err
}

// exportError makes a session that cannot be exported as it is now a
// conflict the operator can wait out.
func exportError(err error) error {
	var point *store.PointConflictError
	if errors.As(err, &point) {
		return conflict("%s", point.Msg)
	}
	return err
}
