package auth

import "context"

// Scopes a credential may hold. A key or token without the scope a route
// needs is refused with 403.
const (
	// ScopeSessionsRead lets a credential read sessions, their histories
	// and turns, and follow their streams.
	ScopeSessionsRead = "sessions:read"
	// ScopeSessionsWrite lets a credential create and delete sessions, run,
	// cancel and compact them.
	ScopeSessionsWrite = "sessions:write"
)

// AllScopes are every scope there is: what a key made without saying, or
// a token without a scope claim, may do.
var AllScopes = []string{ScopeSessionsRead, ScopeSessionsWrite}

// Principal is who a request acts as: a tenant, through one of its API keys
// or as one of its end users (a token's subject).
type Principal struct {
	TenantID string
	// KeyID is the public id of the API key used; empty for a token.
	KeyID string
	// Subject is the end user a token names (its sub claim); empty for an
	// API key. A principal with a subject sees only the sessions it owns.
	Subject string
	// IssuerID is the registered issuer that vouched for Subject.
	IssuerID string
	Scopes   []string
}

// Has reports whether the principal holds scope.
func (p Principal) Has(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// Owner is the session owner the principal is confined to: its subject, or
// "" (any owner) for an API key.
func (p Principal) Owner() string { return p.Subject }

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
