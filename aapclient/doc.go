// Package aapclient is a Go client for any server of the Agent Application
// Protocol v3 (AAP), with optional support for aapd's extensions.
//
// Every endpoint of the protocol has a typed method that takes and returns
// the wire types of package aap, so a request built here is exactly what a
// server validates. Turn streams are read as an iterator of aap.Event
// (Stream.Events); against aapd, a stream whose connection drops is resumed
// from the last event seen (Last-Event-ID), so the caller sees every event
// once, in order.
//
// Requests that a server refused without acting on them (409 turn running,
// 429, 503) are retried with bounded backoff, waiting as long as the
// server's Retry-After says. POST /sessions and POST /sessions/:id/turns
// carry an Idempotency-Key (generated when the caller gives none), so a
// retry after a lost answer never runs anything twice on servers that honour
// it. Errors from a server are *Error values carrying its problem details.
//
// The package depends only on package aap and the standard library.
package aapclient
