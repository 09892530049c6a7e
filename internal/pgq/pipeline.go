package pgq

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipeline sends many statements in one round trip. New(p) queues
// statements instead of running them:
//
//   - an :exec statement's method returns nil at once; Send runs it and
//     reports its error;
//   - a :batchmany / :batchexec statement's method returns its results
//     object; the first read of any results object sends everything queued
//     so far, and results are read in the order they were queued.
//
// Send reads whatever is left and must be called last; Commit queues the
// transaction's COMMIT as its last statement. Every error names its query.
type Pipeline struct {
	tx     BatchSender
	b      pgx.Batch
	byExec []bool           // per statement: queued by Exec, so read by the pipeline itself
	br     pgx.BatchResults // once sent
	read   int              // results read so far
	err    error            // the first failure read

	commit   *Tx // the transaction whose COMMIT is queued (Commit), at commitAt
	commitAt int
}

// BatchSender is where a pipeline goes: a Tx, or a pool (one implicit
// transaction, each statement with a snapshot of its own).
type BatchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// NewPipeline returns an empty pipeline on tx.
func NewPipeline(tx BatchSender) *Pipeline { return &Pipeline{tx: tx} }

// Send sends what is not sent yet, reads every result not read yet, and
// returns the first failure.
func (p *Pipeline) Send(ctx context.Context) error {
	if p.b.Len() == 0 {
		return nil
	}
	p.send(ctx)
	for p.read < p.b.Len() {
		if !p.byExec[p.read] {
			_ = p.fail(p.read, errors.New("results queued but never read"))
		}
		_, _ = p.exec() // a failure is kept in p.err
	}
	if err := p.br.Close(); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}

// Close ends a pipeline left early (after a failed read): it closes the
// results, so the connection can be used again. It may follow Send.
func (p *Pipeline) Close() {
	if p.br != nil {
		_ = p.br.Close()
	}
}

// Rows reads the rows of a :batchmany method that queued one statement:
// rows, err := Rows(q.IdentityLookup(ctx, params).Query).
func Rows[R any](query func(func(int, []R, error))) ([]R, error) {
	var (
		out []R
		err error
	)
	query(func(_ int, rows []R, e error) {
		out = append(out, rows...)
		if err == nil {
			err = e
		}
	})
	return out, err
}

// Run reads the result of a :batchexec method: err := Run(q.PeriodLock(ctx, params).Exec).
func Run(exec func(func(int, error))) error {
	var err error
	exec(func(_ int, e error) {
		if err == nil {
			err = e
		}
	})
	return err
}

func (p *Pipeline) send(ctx context.Context) {
	if p.br == nil {
		p.br = p.tx.SendBatch(ctx, &p.b)
	}
}

// fail records statement i's failure, named, unless an earlier statement
// failed: the server then skipped the rest, so the earlier failure is the
// one every later read reports.
func (p *Pipeline) fail(i int, err error) error {
	if p.err != nil {
		return p.err
	}
	err = wrap(p.b.QueuedQueries[i].SQL, err)
	p.err = err
	return err
}

// exec reads the next result as an Exec and checks its guard.
func (p *Pipeline) exec() (pgconn.CommandTag, error) {
	i := p.read
	p.read++
	tag, err := p.br.Exec()
	if err != nil {
		return tag, p.fail(i, err)
	}
	if p.commit != nil && i == p.commitAt {
		return tag, p.committedBy(i, tag)
	}
	return tag, nil
}

// next sends the pipeline if it is not sent, reads the :exec results
// queued before the next results object's, and returns that one's index.
func (p *Pipeline) next(ctx context.Context) int {
	p.send(ctx)
	for p.read < p.b.Len() && p.byExec[p.read] {
		_, _ = p.exec() // a failure is kept in p.err
	}
	return p.read
}

// Exec queues sql; it runs at Send.
func (p *Pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.b.Queue(sql, args...)
	p.byExec = append(p.byExec, true)
	return pgconn.CommandTag{}, nil
}

// SendBatch queues b's statements and returns their results, read lazily.
func (p *Pipeline) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries {
		p.b.Queue(q.SQL, q.Arguments...)
		p.byExec = append(p.byExec, false)
	}
	return pipelineResults{p, ctx}
}

var errNotQueued = errors.New("a pipeline queues statements; run a query that is read at once outside it")

// Query refuses: only :exec and :batch* statements can be queued.
func (p *Pipeline) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	return nil, wrap(sql, errNotQueued)
}

// QueryRow refuses, as Query.
func (p *Pipeline) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	return errRow{wrap(sql, errNotQueued)}
}

// CopyFrom refuses, as Query.
func (p *Pipeline) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNotQueued
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// pipelineResults are the results of statements a :batch* method queued:
// each read takes the pipeline's next result.
type pipelineResults struct {
	p   *Pipeline
	ctx context.Context
}

func (r pipelineResults) Exec() (pgconn.CommandTag, error) {
	r.p.next(r.ctx)
	return r.p.exec()
}

func (r pipelineResults) Query() (pgx.Rows, error) {
	i := r.p.next(r.ctx)
	r.p.read++
	rows, err := r.p.br.Query()
	if err != nil {
		return rows, r.p.fail(i, err)
	}
	return pipelineRows{rows, r.p, i}, nil
}

func (r pipelineResults) QueryRow() pgx.Row {
	i := r.p.next(r.ctx)
	r.p.read++
	return pipelineRow{r.p.br.QueryRow(), r.p, i}
}

// Close does nothing: the pipeline's results are closed by Send.
func (r pipelineResults) Close() error { return nil }

// Tx is nil: a pipeline begins no transaction (it runs in its caller's, or
// in the implicit one of a batch sent on a pool).
func (r pipelineResults) Tx() pgx.Tx { return nil }

type pipelineRows struct {
	pgx.Rows
	p *Pipeline
	i int
}

func (r pipelineRows) Scan(dest ...any) error {
	if err := r.Rows.Scan(dest...); err != nil {
		return r.p.fail(r.i, err)
	}
	return nil
}

func (r pipelineRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return r.p.fail(r.i, err)
	}
	return nil
}

type pipelineRow struct {
	row pgx.Row
	p   *Pipeline
	i   int
}

// Scan reads the row. No row (pgx.ErrNoRows) is the statement's answer,
// not its failure: the caller decides what it means, and the pipeline's
// other statements and its COMMIT go on.
func (r pipelineRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return r.p.fail(r.i, err)
	}
	return err
}
