package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipeline sends many statements in one round trip: On(p) queues each :exec
// statement instead of running it (its Exec returns nil at once), and Send
// runs them all in one pgx.Batch and returns the first failure, named by
// its query. A statement queued right after Guard(n) must change exactly n
// rows: the guarded updates assert that nothing changed what the
// transaction locked and read. Only :exec statements can be queued.
type Pipeline struct {
	b      pgx.Batch
	guards map[int]int64
}

// Len is the number of statements queued.
func (p *Pipeline) Len() int { return p.b.Len() }

// Guard requires the next statement queued to change exactly rows rows.
func (p *Pipeline) Guard(rows int) {
	if p.guards == nil {
		p.guards = map[int]int64{}
	}
	p.guards[p.b.Len()] = int64(rows)
}

// Send runs the queued statements on tx in one round trip, then empties p.
func (p *Pipeline) Send(ctx context.Context, tx interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}) error {
	defer func() { p.b, p.guards = pgx.Batch{}, nil }()
	if p.b.Len() == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &p.b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
	for i, q := range p.b.QueuedQueries {
		tag, err := br.Exec()
		if err != nil {
			return wrap(q.SQL, err)
		}
		if want, ok := p.guards[i]; ok && tag.RowsAffected() != want {
			return fmt.Errorf("%s: guarded update matched %d of %d rows", Name(q.SQL), tag.RowsAffected(), want)
		}
	}
	return br.Close()
}

// Exec queues sql; it runs at Send.
func (p *Pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

var errNotExec = errors.New("a pipeline queues :exec statements only")

// Query refuses: a query's rows are read where it is run.
func (p *Pipeline) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	return nil, wrap(sql, errNotExec)
}

// QueryRow refuses, as Query.
func (p *Pipeline) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	return errRow{wrap(sql, errNotExec)}
}

// CopyFrom refuses, as Query.
func (p *Pipeline) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNotExec
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
