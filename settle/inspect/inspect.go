// Package inspect is the read side of settle's tables: conflict cases and
// their resolutions, the story of one record (explain), dead letters and
// parked messages, balances and accounts, search, the period statement and
// the comparison with a source system's export. It is what the analysts'
// page, the CLI's read commands and the metrics read.
//
// It only reads: every query is a SELECT, and the month-end reads run as
// the role settle_reader in a READ ONLY transaction. It never settles,
// resolves or closes anything (those are settle's), and it speaks settle's
// vocabulary (message.Outcome, message.Coordinates) rather than its own.
package inspect

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
)

// Store reads one settle database.
type Store struct {
	pool *pgxpool.Pool
	cfg  settle.Config
	dec  *record.Decoder
}

// New returns the read side over the database of s, with its settings
// (topic names, the decoder a source export is read with).
func New(s *settle.Store) *Store {
	return NewOn(s, s.Pool())
}

// NewOn is New reading over pool, a pool of its own on the same database:
// the analysts' reads, kept off the connections settling needs.
func NewOn(s *settle.Store, pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, cfg: s.Config(), dec: s.Decoder()}
}

// The queries are the .sql files in sql/, run through the methods sqlc
// generates from them (settle/internal/db): db.On(s.pool) or db.On(tx).
