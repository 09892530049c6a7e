// Package pgq is what every package of generated queries runs on: errors
// named by their query, plans bound at plan time (Planned) or kept on
// index probes (ProbesOnly), transactions that fold BEGIN and COMMIT into
// their first and last round trips (Tx, Pipeline), arrays and COPY rows
// encoded without pgx's reflection, and the outbox's headers as JSON. The
// queries themselves are generated per owner (sqlc.yaml at the
// repository's root), each into a package that imports this one; pgq
// holds no query and knows no table.
package pgq

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what a generated package's queries run on: a pool, a
// connection, a transaction (pgx's or Tx), or a Pipeline. Each generated
// package declares the same interface as its own DBTX.
type DBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
	Query(context.Context, string, ...interface{}) (pgx.Rows, error)
	QueryRow(context.Context, string, ...interface{}) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// Named returns c with every error wrapped in the name of its query
// ("conflict_case_get: ..."): a generated package's On is New(Named(c)).
func Named(c DBTX) DBTX { return named{c} }

// Planned runs its queries with their values bound at plan time (pgx
// QueryExecModeExec: an unnamed statement, always a custom plan, never a
// cached generic one): for a query whose best plan depends on its values,
// or on a table that grows faster than it is analysed. Wrap the pool, the
// connection or the transaction in it: On(Planned(tx)).
func Planned(c DBTX) DBTX { return planned{c} }

type planned struct{ DBTX }

func (p planned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.DBTX.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (p planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.DBTX.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

type named struct{ c DBTX }

func (n named) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t, err := n.c.Exec(ctx, sql, args...)
	return t, wrap(sql, err)
}

func (n named) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := n.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(sql, err)
	}
	return namedRows{rows, sql}, nil
}

func (n named) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return namedRow{n.c.QueryRow(ctx, sql, args...), sql}
}

func (n named) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	rows, err := n.c.CopyFrom(ctx, table, columns, src)
	if err != nil {
		return rows, fmt.Errorf("copy %s: %w", table.Sanitize(), err)
	}
	return rows, nil
}

// SendBatch sends b as it is; the queries that queue many statements run
// in a Pipeline, which names their errors.
func (n named) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return n.c.SendBatch(ctx, b)
}

type namedRows struct {
	pgx.Rows
	sql string
}

func (r namedRows) Scan(dest ...any) error { return wrap(r.sql, r.Rows.Scan(dest...)) }
func (r namedRows) Err() error             { return wrap(r.sql, r.Rows.Err()) }

type namedRow struct {
	row pgx.Row
	sql string
}

func (r namedRow) Scan(dest ...any) error { return wrap(r.sql, r.row.Scan(dest...)) }

// wrap prefixes err with the name of the query sql is: its file's name,
// from the "-- name: ConflictCaseGet :one" line sqlc puts first.
func wrap(sql string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", Name(sql), err)
}

// Deref is *p, or the zero value for nil: for the columns sqlc cannot
// tell are never NULL (a function's result columns, a LEFT JOIN's).
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Name is the name of a generated query's file ("conflict_case_get"), or
// "a statement" for SQL that is not one.
func Name(sql string) string {
	rest, ok := strings.CutPrefix(sql, "-- name: ")
	if !ok {
		return "a statement"
	}
	camel, _, _ := strings.Cut(rest, " ")
	var b strings.Builder
	prev := 'A'
	for _, r := range camel {
		if unicode.IsUpper(r) && !unicode.IsUpper(prev) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
		prev = r
	}
	return b.String()
}
