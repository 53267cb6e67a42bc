package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/transfer"
)

// An end user's rights over their data (docs/lifecycle.md): to get it all
// (ExportOwner) and to have it erased (EraseOwner). An end user is a
// token's subject (sub) within one tenant; sessions an API key made carry
// one when it named it (?owner=).

// Erasure is what erasing an end user deleted, as the admin API answers it.
type Erasure struct {
	Tenant            string `json:"tenant"`
	Owner             string `json:"owner"`
	Sessions          int64  `json:"sessions"`
	Messages          int64  `json:"messages"`
	CompactedMessages int64  `json:"compactedMessages"`
	Compactions       int64  `json:"compactions"`
	Turns             int64  `json:"turns"`
	CancelledTurns    int64  `json:"cancelledTurns"`
	IdempotencyKeys   int64  `json:"idempotencyKeys"`
	WebhookDeliveries int64  `json:"webhookDeliveries"`
	ForksKept         int64  `json:"forksKept"`
}

// checkOwner refuses what cannot be a token's subject.
func checkOwner(owner string) error {
	if !auth.ValidOwner(owner) {
		return invalid("sub", "must be an end user's subject (a token's sub: 1 to 255 bytes, no control characters)")
	}
	return nil
}

// EraseOwner deletes every session of an end user of a tenant, with
// everything that names them (store.Store.OwnerErase), in one transaction,
// and stops their running turns: in this process and every other one,
// through the database's notification. An end user with nothing is no
// error: the answer counts nothing. The audit line names the subject: it
// is the record that the erasure was done.
func (s *Service) EraseOwner(ctx context.Context, tenant, owner string) (Erasure, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return Erasure{}, err
	}
	if err := checkOwner(owner); err != nil {
		return Erasure{}, err
	}
	e, err := s.st.OwnerErase(ctx, t.ID, owner)
	if err != nil {
		return Erasure{}, err
	}
	for _, turn := range e.RunningTurns {
		// The turn's writes already fail (its session is gone); this
		// stops its model at once rather than at its next write.
		if err := s.st.Notify(context.WithoutCancel(ctx), store.CancelChannel, turn); err != nil {
			s.log.WarnContext(ctx, "notify cancel of an erased owner's turn", "turn", turn, "err", err)
		}
	}
	out := Erasure{Tenant: t.Name, Owner: owner, Sessions: e.Sessions, Messages: e.Messages,
		CompactedMessages: e.CompactedMessages, Compactions: e.Compactions, Turns: e.Turns,
		CancelledTurns: int64(len(e.RunningTurns)), IdempotencyKeys: e.IdempotencyKeys,
		WebhookDeliveries: e.WebhookDeliveries, ForksKept: e.ForksKept}
	s.audit(ctx, "owner.erase", t, owner, slog.Int64("sessions", out.Sessions), slog.Int64("messages", out.Messages),
		slog.Int64("turns", out.Turns), slog.Int64("cancelled_turns", out.CancelledTurns), slog.Int64("forks_kept", out.ForksKept))
	return out, nil
}

// ExportOwner writes the document of an end user's sessions to out: a
// tenant document (format aapd-tenant) holding the tenant's name and
// creation time, none of its limits or issuers, and every session the
// user owns. It is the user's own copy of their data: secret option
// values are named, never carried (not even sealed). It checks the tenant
// and the subject before writing anything. done is called after each
// session.
func (s *Service) ExportOwner(ctx context.Context, tenant, owner string, out io.Writer, done func(sessionID string)) (int64, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return 0, err
	}
	if err := checkOwner(owner); err != nil {
		return 0, err
	}
	doc := transfer.Tenant{Name: t.Name, CreatedAt: t.CreatedAt.UTC()}
	n, err := transfer.WriteOwner(ctx, out, s.st, t.ID, owner, doc, transfer.WriteOptions{}, done)
	if err != nil {
		return n, fmt.Errorf("export the sessions of an end user of tenant %q: %w", tenant, err)
	}
	s.audit(ctx, "owner.export", t, owner, slog.Int64("sessions", n))
	return n, nil
}
