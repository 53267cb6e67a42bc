package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// Limits on what a token may carry.
const (
	// MaxTokenBytes bounds a token: it is parsed before anything vouches
	// for it.
	MaxTokenBytes = 16 << 10
	// MaxAudiences bounds the audiences looked up for one token.
	MaxAudiences = 10
	// MaxSubjectBytes bounds a subject: it is stored as the owner of every
	// session its user creates.
	MaxSubjectBytes = 255
	// Leeway is the clock skew tolerated between an issuer and aapd, for
	// exp, nbf and iat.
	Leeway = 30 * time.Second
)

// algorithms are the only JWT algorithms aapd verifies, one per key type
// (AlgorithmFor). Never "none", never an HMAC.
var algorithms = map[string]bool{"RS256": true, "ES256": true, "EdDSA": true}

// Issuer is a registered issuer of end-user tokens, as the verifier needs
// it: a token whose iss and aud match is one of TenantID's end users.
type Issuer struct {
	ID       string
	TenantID string
	Issuer   string
	Audience string
	// JWKSURL or PublicKeys (PEM) hold the issuer's keys, never both.
	JWKSURL    string
	PublicKeys []string
}

// IssuerFinder finds the issuers registered for a token's iss and any of its
// audiences (store.TokenIssuerFind). It runs before the tenant is known.
type IssuerFinder func(ctx context.Context, iss string, audiences []string) ([]Issuer, error)

// TokenError is a token refused. Reason is written for the client; Err, if
// any, is what went wrong underneath, for the logs.
type TokenError struct {
	Reason string
	Err    error
}

func (e *TokenError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *TokenError) Unwrap() error { return e.Err }

func refuse(err error, format string, args ...any) *TokenError {
	return &TokenError{Reason: fmt.Sprintf(format, args...), Err: err}
}

// VerifierConfig configures a Verifier. Zero durations and sizes take the
// defaults.
type VerifierConfig struct {
	Find IssuerFinder
	// IssuerTTL is how long a lookup of issuers is used without asking
	// Find again. Removed issuers are forgotten at once (ForgetTenant);
	// the TTL bounds how long a missed notification keeps one working.
	IssuerTTL           time.Duration
	JWKSRefreshInterval time.Duration
	JWKSMinRefresh      time.Duration
	JWKSTimeout         time.Duration
	JWKSMaxBytes        int64
	Now                 func() time.Time
	Logger              *slog.Logger
}

// DefaultIssuerTTL is VerifierConfig.IssuerTTL's default.
const DefaultIssuerTTL = time.Minute

// Verifier verifies end users' JWTs against the issuers their tenants
// registered, and says who they are.
type Verifier struct {
	cfg        VerifierConfig
	log        *slog.Logger
	jwksClient *http.Client
	life       context.Context
	end        context.CancelFunc

	mu      sync.Mutex
	lookups map[string]issuerLookup // by lookupKey
	keys    map[string]*issuerKeys  // by issuer id
	forgets uint64
}

// NewVerifier returns a verifier; Close stops its key set refreshes.
func NewVerifier(cfg VerifierConfig) *Verifier {
	if cfg.IssuerTTL <= 0 {
		cfg.IssuerTTL = DefaultIssuerTTL
	}
	if cfg.JWKSRefreshInterval <= 0 {
		cfg.JWKSRefreshInterval = DefaultJWKSRefreshInterval
	}
	if cfg.JWKSMinRefresh <= 0 {
		cfg.JWKSMinRefresh = DefaultJWKSMinRefresh
	}
	if cfg.JWKSTimeout <= 0 {
		cfg.JWKSTimeout = DefaultJWKSTimeout
	}
	if cfg.JWKSMaxBytes <= 0 {
		cfg.JWKSMaxBytes = DefaultJWKSMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	life, end := context.WithCancel(context.Background())
	return &Verifier{
		cfg: cfg, log: cfg.Logger, jwksClient: newJWKSClient(cfg.JWKSTimeout, cfg.JWKSMaxBytes),
		life: life, end: end, lookups: map[string]issuerLookup{}, keys: map[string]*issuerKeys{},
	}
}

// Close stops refreshing key sets.
func (v *Verifier) Close() { v.end() }

// tokenClaims are the claims aapd reads.
type tokenClaims struct {
	jwt.RegisteredClaims
	// Scope is OAuth's space-separated scope claim; nil when absent.
	Scope *string `json:"scope,omitempty"`
}

// Verify checks a token and returns the end user it names. A token refused
// is a *TokenError; any other error is aapd's (such as the database being
// unavailable while issuers are looked up), not the token's.
//
// The token is read unverified only to find its issuer: iss and aud name
// the issuers registered for them, whose keys must then verify it, with
// the one algorithm of the key, with iss, aud, sub and exp required.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if len(raw) > MaxTokenBytes {
		return Principal{}, refuse(nil, "the token is longer than %d bytes", MaxTokenBytes)
	}
	var peek tokenClaims
	tok, _, err := jwt.NewParser().ParseUnverified(raw, &peek)
	if err != nil {
		return Principal{}, refuse(err, "the bearer credential is neither an aapd API key nor a well-formed JWT")
	}
	alg := tok.Method.Alg()
	if !algorithms[alg] {
		return Principal{}, refuse(nil, "tokens signed with %q are not accepted (RS256, ES256 or EdDSA are)", alg)
	}
	if peek.Issuer == "" || len(peek.Audience) == 0 {
		return Principal{}, refuse(nil, "the token must have an iss and an aud claim")
	}
	if len(peek.Audience) > MaxAudiences {
		return Principal{}, refuse(nil, "the token has more than %d audiences", MaxAudiences)
	}
	issuers, err := v.issuers(ctx, peek.Issuer, peek.Audience)
	if err != nil {
		return Principal{}, err
	}
	if len(issuers) == 0 {
		return Principal{}, refuse(nil, "no tenant registered issuer %q for the token's audience", peek.Issuer)
	}
	for _, iss := range issuers[1:] {
		if iss.TenantID != issuers[0].TenantID {
			// Which tenant the user belongs to would be the token's
			// choice: refuse rather than guess.
			return Principal{}, refuse(nil, "the token's audiences belong to issuers of more than one tenant")
		}
	}
	var refused error
	for _, iss := range issuers {
		p, err := v.verifyWith(ctx, raw, alg, iss)
		if err == nil {
			return p, nil
		}
		refused = err
	}
	return Principal{}, refused
}

// verifyWith verifies the token with one issuer's keys and claims.
func (v *Verifier) verifyWith(ctx context.Context, raw, alg string, iss Issuer) (Principal, error) {
	keys := v.keysOf(iss)
	var claims tokenClaims
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{alg}),
		jwt.WithIssuer(iss.Issuer),
		jwt.WithAudience(iss.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(v.cfg.Now),
	)
	_, err := parser.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		return keys.verificationKeys(ctx, t, alg)
	})
	if err != nil {
		return Principal{}, refuse(err, "%s", describe(err))
	}
	if err := checkSubject(claims.Subject); err != nil {
		return Principal{}, err
	}
	return Principal{TenantID: iss.TenantID, Subject: claims.Subject, IssuerID: iss.ID, Scopes: scopesOf(claims.Scope)}, nil
}

// describe says, for the client, why the parser refused a token.
func describe(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the token is not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token was issued in the future (iat)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token must have an exp claim"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token's audience is not the registered one"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token's issuer is not the registered one"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the token's signature does not verify"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "no key of the issuer can verify the token (unknown kid, or a key of another algorithm)"
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return "the token's claims are not valid"
	}
	return "the token is not valid"
}

// checkSubject requires a subject fit to be stored as a session's owner.
func checkSubject(sub string) error {
	if sub == "" {
		return refuse(nil, "the token must have a sub claim")
	}
	if len(sub) > MaxSubjectBytes {
		return refuse(nil, "the token's sub is longer than %d bytes", MaxSubjectBytes)
	}
	if !utf8.ValidString(sub) || strings.IndexFunc(sub, unicode.IsControl) >= 0 {
		return refuse(nil, "the token's sub contains control characters")
	}
	return nil
}

// ValidOwner reports whether s could be a session's owner (a token's sub):
// for checking an owner given elsewhere, such as a query parameter.
func ValidOwner(s string) bool { return checkSubject(s) == nil }

// scopesOf reads OAuth's scope claim: absent, every scope; present, the
// scopes it names that aapd knows (others are ignored), possibly none.
func scopesOf(claim *string) []string {
	if claim == nil {
		return AllScopes
	}
	var out []string
	for _, s := range strings.Fields(*claim) {
		for _, known := range AllScopes {
			if s == known && !contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
