// Package migrations embeds the goose SQL migrations so the aapd binary can
// migrate its database itself. A migration that has landed is never edited:
// the next migration changes it.
package migrations

import "embed"

// FS holds the migration files, in goose's SQL format.
//
//go:embed *.sql
var FS embed.FS
