package main

import (
	"context"
	"errors"
	"testing"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Helpers of the end-user token, owner and scope tests (tokens_test.go,
// owners_test.go, scopes_test.go).

// registerIssuer registers a token issuer for a tenant, as the admin API
// would, and removes it when the test ends: an issuer and audience belong
// to one tenant of the whole database, which the package's tests share, so
// a test run again (-count) must find its issuer free.
func (s *testServer) registerIssuer(t *testing.T, tenantID, issuer, audience, jwksURL string, pems ...string) store.TokenIssuer {
	t.Helper()
	iss, err := s.Store.TokenIssuerCreate(context.Background(), store.TokenIssuerCreateParams{
		TenantID: tenantID, Issuer: issuer, Audience: audience, JWKSURL: jwksURL, PublicKeys: pems})
	if err != nil {
		t.Fatalf("register issuer: %v", err)
	}
	t.Cleanup(func() {
		err := s.Store.TokenIssuerDelete(context.Background(), tenantID, iss.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("remove issuer %s: %v", issuer, err)
		}
	})
	return iss
}

// keyWithScopes makes a key of the tenant with exactly the scopes and
// returns a client using it.
func (s *testServer) keyWithScopes(t *testing.T, tenantID string, scopes ...string) *client {
	t.Helper()
	key, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if scopes == nil {
		scopes = []string{}
	}
	if _, err := s.Store.APIKeyCreate(context.Background(), store.APIKeyCreateParams{
		TenantID: tenantID, PublicID: key.PublicID, Hash: key.Hash, Name: "scoped", Scopes: scopes}); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, base: s.base, key: key.Secret}
}

// bearer returns a client sending the credential (a token).
func (s *testServer) bearer(t *testing.T, credential string) *client {
	return &client{t: t, base: s.base, key: credential}
}

// newTenantWithKey is newTenantWithID for tests that need the tenant's id.
func (s *testServer) newTenantWithKey(t *testing.T) (*client, string) {
	t.Helper()
	tn := storetest.NewTenant(t, s.Store)
	return &client{t: t, base: s.base, key: tn.Key}, tn.ID
}
