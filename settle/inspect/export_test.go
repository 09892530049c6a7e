package inspect

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CaseListPlan exposes the listing's EXPLAIN to the plan test.
var CaseListPlan = (*Store).caseListPlan

// WithRowsMax lowers in's limit on listed rows, for the test of the limit.
func WithRowsMax(in StatementInput, n int) StatementInput {
	in.rowsMax = n
	return in
}

// ReadOnlyTx exposes the read side's transaction to the test that proves
// it cannot write.
var ReadOnlyTx = (*Store).readOnly

// caseListPlan is EXPLAIN of the listing for f: of the statement and the
// arguments ListCases sends (exec mode included), as caseList hands them
// to its connection.
func (s *Store) caseListPlan(ctx context.Context, f CaseFilter) (string, error) {
	limit := f.Limit
	if limit == 0 {
		limit = CasePageRowsDefault
	}
	var c captured
	if _, err := caseList(ctx, &c, f, limit+1); !errors.Is(err, errCaptured) {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+c.sql, c.args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	return b.String(), rows.Err()
}

// captured is a connection that runs nothing: it keeps the statement and
// arguments of the one query sent to it and fails it with errCaptured.
type captured struct {
	sql  string
	args []any
}

var errCaptured = errors.New("captured, not run")

func (c *captured) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.sql, c.args = sql, args
	return pgconn.CommandTag{}, errCaptured
}

func (c *captured) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errCaptured
}

func (c *captured) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.sql, c.args = sql, args
	return capturedRow{}
}

func (c *captured) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errCaptured
}

type capturedRow struct{}

func (capturedRow) Scan(...any) error { return errCaptured }

// SendBatch is never called by the listing; it completes db.DBTX.
func (c *captured) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return nil }
