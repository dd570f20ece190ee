// Package migrations holds gantry's Postgres schema as embedded SQL
// migrations, applied in order by goose.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
