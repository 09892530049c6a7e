package pgq

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction of the settling kind (READ COMMITTED, the planner
// settings of ProbesOnly) on a connection of its own, whose BEGIN travels
// with its first round trip and whose COMMIT may travel with its last
// (Pipeline.Commit). A group of the HTTP edge is a few short transactions:
// sent one after the other, BEGIN, the statements and COMMIT were two
// round trips more per transaction, each a wake-up of PostgreSQL's backend
// and of the service on a machine that context-switches at every one.
type Tx struct {
	conn      *pgxpool.Conn
	begun     bool // BEGIN sent
	ended     bool // a pipeline's COMMIT was answered: committed says how
	committed bool
}

// beginSimple begins the transaction by the simple protocol (one round trip
// for all its statements), before a statement that is not a batch.
var beginSimple = "BEGIN ISOLATION LEVEL READ COMMITTED; " + ProbesOnly("SET LOCAL")

// beginBatch is the same as statements of a batch (the extended protocol
// takes one statement each), put in front of the transaction's first batch.
var beginBatch = [2]string{"BEGIN ISOLATION LEVEL READ COMMITTED", probesLocal()}

// Begin takes a connection from pool for a transaction; nothing is sent
// until its first statement.
func Begin(ctx context.Context, pool *pgxpool.Pool) (*Tx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	FastArrays(conn.Conn().TypeMap())
	return &Tx{conn: conn}, nil
}

func (t *Tx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	t.begun = true
	_, err := t.conn.Exec(ctx, beginSimple)
	return err
}

// Exec runs a statement in the transaction.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs a query in the transaction.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs a query of one row in the transaction.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

// CopyFrom copies rows into a table in the transaction.
func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	if rows, ok := src.(CopyRows); ok {
		return copyFrom(ctx, t.conn.Conn(), table, columns, rows)
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// SendBatch sends a batch in the transaction; the transaction's first
// batch carries its BEGIN in front, whose results the caller does not see.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	t.begun = true
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(beginBatch)+len(b.QueuedQueries))}
	for _, sql := range beginBatch {
		full.Queue(sql)
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	return &begunResults{BatchResults: t.conn.SendBatch(ctx, full)}
}

// begunResults are a first batch's results after its BEGIN's.
type begunResults struct {
	pgx.BatchResults
	read bool
	err  error
}

func (r *begunResults) skipBegin() error {
	if !r.read {
		r.read = true
		for _, sql := range beginBatch {
			if _, err := r.BatchResults.Exec(); err != nil {
				r.err = wrap(sql, err)
				break
			}
		}
	}
	return r.err
}

func (r *begunResults) Exec() (pgconn.CommandTag, error) {
	if err := r.skipBegin(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *begunResults) Query() (pgx.Rows, error) {
	if err := r.skipBegin(); err != nil {
		return nil, err
	}
	return r.BatchResults.Query()
}

func (r *begunResults) QueryRow() pgx.Row {
	if err := r.skipBegin(); err != nil {
		return errRow{err}
	}
	return r.BatchResults.QueryRow()
}

func (r *begunResults) Close() error {
	err := r.skipBegin()
	if cerr := r.BatchResults.Close(); err == nil {
		err = cerr
	}
	return err
}

// errNotCommitted is a COMMIT that ended the transaction without
// committing it: PostgreSQL answers ROLLBACK to the COMMIT of a
// transaction a statement failed in.
var errNotCommitted = errors.New("commit: the transaction was rolled back")

// Commit commits the transaction, unless a pipeline already did
// (Pipeline.Commit), and gives its connection back.
func (t *Tx) Commit(ctx context.Context) error {
	if t.conn == nil {
		return errors.New("commit: the transaction has ended")
	}
	defer t.release()
	switch {
	case !t.begun:
		return nil
	case t.ended && !t.committed:
		return errNotCommitted
	case t.ended:
		return nil
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return errNotCommitted
	}
	return nil
}

// Rollback ends the transaction without committing it, if it has not
// ended, and gives its connection back: safe to defer.
func (t *Tx) Rollback(ctx context.Context) {
	if t.conn == nil {
		return
	}
	defer t.release()
	if t.begun && t.conn.Conn().PgConn().TxStatus() != 'I' {
		// On failure the connection is still in a transaction, and the pool
		// closes it instead of reusing it.
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
}

func (t *Tx) release() {
	t.conn.Release()
	t.conn = nil
}

// Commit queues the COMMIT of t as the pipeline's last statement: Send
// then fails unless it committed. Queue it after every other statement.
// Every check of the statements before it must be PostgreSQL's, for the
// COMMIT runs before the client reads their results: a guarded update
// checks its own rows (settle_guard, migration 0011).
func (p *Pipeline) Commit(t *Tx) {
	p.commit, p.commitAt = t, p.b.Len()
	p.b.Queue("COMMIT")
	p.byExec = append(p.byExec, true)
}

// committedBy reads the result of a pipeline's COMMIT.
func (p *Pipeline) committedBy(i int, tag pgconn.CommandTag) error {
	p.commit.ended = true
	if tag.String() != "COMMIT" {
		return p.fail(i, fmt.Errorf("%w (answered %s)", errNotCommitted, tag))
	}
	p.commit.committed = true
	return nil
}
