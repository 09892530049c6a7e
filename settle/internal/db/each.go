package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// A generated :many method collects every row before it returns. The few
// queries that scan a whole table for a caller that needs one row at a
// time (reconcile's hash chain walks every ledger row) also get an Each
// form, written here: the generated query and row type, the rows handed
// to fn as they arrive, so memory does not grow with the table.

// ReconcileHashChainEach runs ReconcileHashChain and hands fn its rows in
// order; an error from fn stops it and is returned as it is.
func (q *Queries) ReconcileHashChainEach(ctx context.Context, tenantID string, fn func(ReconcileHashChainRow) error) error {
	return each(ctx, q, reconcileHashChain, fn, tenantID)
}

// each runs sql and scans every row into T by position: the generated
// row type has one field per column, in the query's order.
func each[T any](ctx context.Context, q *Queries, sql string, fn func(T) error, args ...any) error {
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, err := pgx.RowToStructByPos[T](rows)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}
