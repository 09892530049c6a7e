package pgq

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// testTx is a transaction on the test server (SETTLE_TEST_DATABASE_URL,
// else the machine's PostgreSQL) with a temporary table t(id, n), rolled
// back at the end.
func testTx(t *testing.T) pgx.Tx {
	t.Helper()
	url := os.Getenv("SETTLE_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v (start PostgreSQL, or set SETTLE_TEST_DATABASE_URL)", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE t (id int PRIMARY KEY, n int NOT NULL) ON COMMIT DROP;
		INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)`); err != nil {
		t.Fatal(err)
	}
	return tx
}

const (
	bump  = "-- name: ProbeBump :exec\nUPDATE t SET n = n + 1 WHERE id = ANY ($1::int[])"
	count = "-- name: ProbeCount :batchmany\nSELECT count(*) FROM t WHERE n > 0"
	bad   = "-- name: ProbeBad :exec\nINSERT INTO t VALUES (1, 0)"
)

// TestPipelineReadsInOrder: :exec statements queued before a :batch*
// statement's results are read (and checked) before those results, in
// one round trip; a failing statement's error names it and is the one
// Send returns, and the one a later statement's read returns.
func TestPipelineReadsInOrder(t *testing.T) {
	ctx := context.Background()
	tx := testTx(t)
	p := NewPipeline(tx)
	defer p.Close()
	_, _ = p.Exec(ctx, bump, []int32{1, 2})
	b := &pgx.Batch{}
	b.Queue(count)
	res := p.SendBatch(ctx, b)
	var n int64
	if err := res.QueryRow().Scan(&n); err != nil || n != 2 {
		t.Fatalf("count after the queued update = %d, %v; want 2, nil", n, err)
	}
	if err := p.Send(ctx); err != nil {
		t.Fatal(err)
	}

	p = NewPipeline(tx)
	defer p.Close()
	_, _ = p.Exec(ctx, bad)
	_, _ = p.Exec(ctx, bump, []int32{3})
	err := p.Send(ctx)
	var pgErr interface{ SQLState() string }
	if err == nil || !strings.HasPrefix(err.Error(), "probe_bad: ") || !errors.As(err, &pgErr) || pgErr.SQLState() != "23505" {
		t.Fatalf("Send = %v, want probe_bad's unique violation first", err)
	}

	// A read after the failing statement (which the server then skipped)
	// names the statement that failed, not the one read.
	p = NewPipeline(testTx(t))
	defer p.Close()
	_, _ = p.Exec(ctx, bad)
	b = &pgx.Batch{}
	b.Queue(count)
	err = p.SendBatch(ctx, b).QueryRow().Scan(&n)
	if err == nil || !strings.HasPrefix(err.Error(), "probe_bad: ") || !errors.As(err, &pgErr) || pgErr.SQLState() != "23505" {
		t.Fatalf("read after a failed statement = %v, want probe_bad's unique violation", err)
	}
}

// TestName: a statement is named by its sqlc name in snake case, and one
// without a name is "a statement", so that an error says which statement
// failed.
func TestName(t *testing.T) {
	for sql, want := range map[string]string{
		"-- name: AccountReadByID :batchmany\nSELECT 1": "account_read_by_id",
		"-- name: IdentityCopy :copyfrom\n":             "identity_copy",
		"SELECT 1":                                      "a statement",
	} {
		if got := Name(sql); got != want {
			t.Errorf("Name(%q) = %q, want %q", sql, got, want)
		}
	}
}
