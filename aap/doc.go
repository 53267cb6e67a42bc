// Package aap holds the wire types of the Agent Application Protocol v3 and
// the rules a request must follow before a server acts on it.
//
// The package is pure: it performs no I/O and imports no other package of
// this module, so the protocol can be read, tested and reused on its own.
// JSON encoding is exact: every type marshals to the shape the specification
// names (for example a message's content is either a string or an array of
// content blocks, and keeps whichever form it was given).
package aap

// Version is the protocol version served in GET /meta.
const Version = 3
