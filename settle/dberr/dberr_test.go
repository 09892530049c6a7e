package dberr_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/settletest"
)

// TestClassify: what each kind of failure means to the caller: serialization
// failures, deadlocks and a concurrent claim of the same key (on a table or
// on one of its tenant partitions) are contention; a server going away and
// a dead connection are an outage; a race the caller found itself
// (wrapping ErrContention) is contention; a cancelled call, any other
// unique key and any other error are neither (possibly the record's).
func TestClassify(t *testing.T) {
	pg := func(code, constraint string) error {
		return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code, ConstraintName: constraint})
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"serialization failure", pg("40001", ""), dberr.ErrContention},
		{"deadlock", pg("40P01", ""), dberr.ErrContention},
		{"same identity claimed", pg("23505", "identities_scope_key"), dberr.ErrContention},
		{"same identity claimed on a tenant partition", pg("23505", "identities_scope_key_p3"), dberr.ErrContention},
		{"an Idempotency-Key inserted by another writer", pg("23505", "idempotency_keys_key"), dberr.ErrContention},
		{"another unique key", pg("23505", "webhook_subscriptions_key"), nil},
		{"a check constraint", pg("23514", "idempotency_keys_key_length"), nil},
		{"server shutting down", pg("57P01", ""), dberr.ErrUnavailable},
		{"too many connections", pg("53300", ""), dberr.ErrUnavailable},
		{"connection failure", pg("08006", ""), dberr.ErrUnavailable},
		{"closed connection", fmt.Errorf("send: %w", net.ErrClosed), dberr.ErrUnavailable},
		{"a race found by the caller", fmt.Errorf("lock accounts: %w", dberr.ErrContention), dberr.ErrContention},
		{"cancelled", fmt.Errorf("read: %w", context.Canceled), nil},
		{"anything else", errors.New("amount out of range"), nil},
	} {
		if got := dberr.Classify(c.err); !errors.Is(got, c.want) || (c.want == nil && got != nil) {
			t.Errorf("%s: Classify = %v, want %v", c.name, got, c.want)
		}
		wrapped := dberr.Wrap("settle a batch", c.err)
		if c.want != nil && !errors.Is(wrapped, c.want) {
			t.Errorf("%s: Wrap = %v, does not carry %v", c.name, wrapped, c.want)
		}
		if !errors.Is(wrapped, c.err) {
			t.Errorf("%s: Wrap = %v, lost the error", c.name, wrapped)
		}
	}
}

// TestClassifyRefusedConnections: a connection the server refuses with a
// reason of its own (here a database that does not exist, as for one that
// does not accept connections or a role gone) is an outage, not a failure
// of the record being settled: pgx wraps the server's error in a
// ConnectError, and the server's code alone read as "anything else", so
// every record of the batch was retried and tried for a dead letter.
func TestClassifyRefusedConnections(t *testing.T) {
	url := settletest.ServerURL()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "settle_no_such_database"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err == nil {
		_ = conn.Close(context.Background())
		t.Fatal("connected to a database that does not exist")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		t.Fatalf("connect: %v, want the server's 3D000", err)
	}
	if got := dberr.Classify(err); !errors.Is(got, dberr.ErrUnavailable) {
		t.Errorf("Classify(%v) = %v, want ErrUnavailable", err, got)
	}
}
