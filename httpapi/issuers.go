package httpapi

import (
	"context"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// issuerFinder looks up token issuers in the store for the verifier,
// which knows nothing of the store.
func issuerFinder(st *store.Store) auth.IssuerFinder {
	return func(ctx context.Context, iss string, audiences []string) ([]auth.Issuer, error) {
		found, err := st.TokenIssuerFind(ctx, iss, audiences)
		if err != nil {
			return nil, err
		}
		out := make([]auth.Issuer, len(found))
		for i, f := range found {
			out[i] = auth.Issuer{ID: f.ID, TenantID: f.TenantID, Issuer: f.Issuer, Audience: f.Audience,
				JWKSURL: f.JWKSURL, PublicKeys: f.PublicKeys}
		}
		return out, nil
	}
}
