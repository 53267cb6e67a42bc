package auth

import "context"

// Principal is who a request acts as: a tenant, through one of its keys.
type Principal struct {
	TenantID string
	// KeyID is the public id of the API key used.
	KeyID string
	// Subject is the end user a token acts for (its sub claim); empty for
	// an API key.
	Subject string
	Scopes  []string
}

type principalKey struct{}

// NewContext returns ctx carrying p. The authentication middleware is the
// only writer; handlers read it once with FromContext.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the request's principal, if it was authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
