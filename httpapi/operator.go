package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireOperator lets a request through only with the operator's token
// (Config.AdminToken) as Authorization: Bearer <token>. It guards what no
// tenant may see, such as /metrics on the main listener. The comparison
// takes the same time whatever the token sent, so it cannot be guessed a
// byte at a time; both sides are hashed first so that not even the token's
// length shows.
func (s *Server) requireOperator(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" {
			s.fail(w, r, probUnauthorized.with("send the operator token as Authorization: Bearer <token>"))
			return
		}
		scheme, token, ok := strings.Cut(header, " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.fail(w, r, invalidToken("this endpoint takes the operator token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
