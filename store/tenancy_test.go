package store_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// An (issuer, audience) pair names one tenant; a token is found by its iss
// and any of its audiences; deleting is scoped to the tenant.
func TestTokenIssuers(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	a, b := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	// An issuer and audience belong to one tenant of the whole database:
	// the test's own are removed, so that it passes when run again.
	forget := func(tenantID, id string) {
		t.Cleanup(func() {
			if err := st.TokenIssuerDelete(ctx, tenantID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Error(err)
			}
		})
	}
	ia, err := st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{TenantID: a.ID, Issuer: "https://id.example", Audience: "app-a", JWKSURL: "https://id.example/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	forget(a.ID, ia.ID)
	if _, err := st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{TenantID: b.ID, Issuer: "https://id.example", Audience: "app-a", PublicKeys: []string{"pem"}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("another tenant took the same pair: %v, want ErrConflict", err)
	}
	ib, err := st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{TenantID: b.ID, Issuer: "https://id.example", Audience: "app-b", PublicKeys: []string{"pem"}})
	if err != nil {
		t.Fatal(err)
	}
	forget(b.ID, ib.ID)
	if _, err := st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{TenantID: b.ID, Issuer: "x", Audience: "y"}); err == nil {
		t.Error("an issuer with neither a JWKS URL nor keys was stored")
	}
	found, err := st.TokenIssuerFind(ctx, "https://id.example", []string{"other", "app-b"})
	if err != nil || len(found) != 1 || found[0].ID != ib.ID || found[0].TenantID != b.ID || found[0].PublicKeys[0] != "pem" {
		t.Fatalf("find: %+v, %v", found, err)
	}
	if err := st.TokenIssuerDelete(ctx, b.ID, ia.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting another tenant's issuer: %v, want ErrNotFound", err)
	}
	if err := st.TokenIssuerDelete(ctx, a.ID, ia.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := st.TokenIssuerList(ctx, a.ID); err != nil || len(list) != 0 {
		t.Errorf("after delete: %+v, %v", list, err)
	}
}

// Limits round-trip, zero restores the default, and deleting a tenant takes
// everything it owns with it.
func TestTenantLimitsAndDelete(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	got, err := st.TenantSetLimits(ctx, tn.ID, store.TenantLimits{RequestsPerSecond: 2.5, Burst: 5, MaxRunningTurns: 3})
	if err != nil || got.Limits != (store.TenantLimits{RequestsPerSecond: 2.5, Burst: 5, MaxRunningTurns: 3}) {
		t.Fatalf("set limits: %+v, %v", got, err)
	}
	if got, _ := st.TenantSetLimits(ctx, tn.ID, store.TenantLimits{Burst: 7}); got.Limits != (store.TenantLimits{Burst: 7}) {
		t.Errorf("zero fields: %+v", got.Limits)
	}
	k, _ := auth.GenerateKey()
	if _, err := st.APIKeyCreate(ctx, store.APIKeyCreateParams{TenantID: tn.ID, PublicID: k.PublicID, Hash: k.Hash}); err != nil {
		t.Fatal(err)
	}
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo", Owner: "user-1"})
	if err != nil || sess.Owner != "user-1" {
		t.Fatalf("session: %+v, %v", sess, err)
	}
	if err := st.TenantDelete(ctx, tn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.APIKeyGetByPublicID(ctx, k.PublicID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("key after tenant delete: %v", err)
	}
	if _, err := st.SessionGet(ctx, tn.ID, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session after tenant delete: %v", err)
	}
	if err := st.TenantDelete(ctx, tn.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	// A tenant without a key is deleted too (a LEFT JOIN of no key once
	// made its list of keys {NULL}, a 500).
	bare, err := st.TenantCreate(ctx, "bare-"+tn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.TenantDelete(ctx, bare.ID); err != nil {
		t.Errorf("deleting a tenant without keys: %v", err)
	}
	// A cursor that decodes to bytes that are not UTF-8 is a bad cursor,
	// not a database error.
	bad := base64.RawURLEncoding.EncodeToString([]byte{0x9e})
	if _, err := st.TenantListPage(ctx, bad, 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("tenants, a cursor of bad UTF-8: %v", err)
	}
	if _, err := st.APIKeyListPage(ctx, tn.ID, base64.RawURLEncoding.EncodeToString([]byte("2025-01-01T00:00:00Z|\x9e")), 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("keys, a cursor of bad UTF-8: %v", err)
	}
	if _, err := st.TokenIssuerListPage(ctx, tn.ID, base64.RawURLEncoding.EncodeToString([]byte("iss_\x9e")), 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("issuers, a cursor of bad UTF-8: %v", err)
	}
}

// Usage counts live sessions' turns and keeps deleted sessions' turns.
func TestUsageOutlivesDeletedSessions(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	begun := beginTurn(t, st, "hi")
	ref := begun.Turn.Ref()
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{
		Ref: ref, Step: 1, FirstSeq: begun.LastSeq + 1, Status: store.TurnCompleted, StopReason: aap.StopEndTurn,
		InputTokens: 10, OutputTokens: 4,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo: hi"}), Origin: store.OriginAgent}},
		Events:   []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
	}); err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	want := []store.UsageRow{{Day: today, Agent: "echo", Turns: 1, InputTokens: 10, OutputTokens: 4}}
	check := func(when string) {
		t.Helper()
		got, err := st.Usage(ctx, ref.TenantID, today, today.Add(24*time.Hour))
		if err != nil || len(got) != 1 || got[0] != want[0] {
			t.Errorf("usage %s: %+v, %v; want %+v", when, got, err, want)
		}
	}
	check("with the session")
	if _, err := st.SessionDelete(ctx, ref.TenantID, ref.SessionID); err != nil {
		t.Fatal(err)
	}
	check("after deleting the session")
	if got, _ := st.Usage(ctx, ref.TenantID, today.Add(24*time.Hour), today.Add(48*time.Hour)); len(got) != 0 {
		t.Errorf("usage of tomorrow: %+v", got)
	}
}
