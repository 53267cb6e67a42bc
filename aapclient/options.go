package aapclient

import (
	"crypto/rand"
	"net/http"
)

// CallOption configures one call.
type CallOption func(*callConfig)

type callConfig struct {
	idempotencyKey string
}

// WithIdempotencyKey sends key as the Idempotency-Key of a POST that creates
// something (a session, a turn). Use it to retry across processes or
// restarts; within one call the client generates a key by itself, so its
// own retries are safe anyway.
func WithIdempotencyKey(key string) CallOption {
	return func(c *callConfig) { c.idempotencyKey = key }
}

func callOptions(opts []CallOption) callConfig {
	var c callConfig
	for _, o := range opts {
		o(&c)
	}
	if c.idempotencyKey == "" {
		c.idempotencyKey = NewIdempotencyKey()
	}
	return c
}

// IdempotencyKeyHeader is the header that makes a POST safe to retry.
const IdempotencyKeyHeader = "Idempotency-Key"

func (c callConfig) idempotencyHeader() http.Header {
	return http.Header{IdempotencyKeyHeader: {c.idempotencyKey}}
}

// NewIdempotencyKey returns a fresh random key (26 characters, 130 bits).
func NewIdempotencyKey() string { return rand.Text() }
