package inspect

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/schema"
)

// ReaderRole is the PostgreSQL role the read side runs under
// (schema.ReaderRole).
const ReaderRole = schema.ReaderRole

// readOnly runs fn in one REPEATABLE READ, READ ONLY transaction under
// ReaderRole, and always rolls it back. Two locks on one door: the
// transaction refuses any write (SQLSTATE 25006), and the role has no
// privilege to write (42501) even if the access mode were lifted. Every
// read of fn sees one snapshot, so a report built from many queries adds
// up.
func (s *Store) readOnly(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return dberr.Wrap(what+": begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+ReaderRole); err != nil {
		return fmt.Errorf("%s: take on role %s (the login must be a member of it, or of settle_app; run settle migrate): %w", what, ReaderRole, err)
	}
	return fn(tx)
}
