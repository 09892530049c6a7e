// Package dberr says what a failed call to settle's database means to its
// caller: ErrUnavailable (the database itself failed: wait and retry the
// same work), ErrContention (lost races: retry, never the record's fault),
// ErrClaimLost (a fenced write whose claim another attempt took over), or
// anything else (a defect, or a record the database refused). Every room
// that speaks to the database wraps its errors with Wrap, so callers
// branch on these three whichever room failed.
package dberr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable marks a failure of the database itself (connection lost or
// refused, server shutting down, too many connections). Nothing about the
// records caused it: callers pause and retry the same batch with backoff for
// as long as it lasts, and never dead-letter a record because of it.
var ErrUnavailable = errors.New("database unavailable")

// ErrContention marks a batch that lost too many races (serialization
// failures, deadlocks, concurrent claims of its identities) in a row.
// It never counts against a record.
var ErrContention = errors.New("contention")

// ErrClaimLost is returned by a fenced write of the settle database's rooms
// (idempotency.Store.Complete, deliveries.Store.Complete, ...) whose attempt
// no longer owns the claim: its lease expired and another attempt took it
// over, or the claim is finished. The write changed nothing. It is declared
// here, below both rooms, so that callers branch on one error whichever
// room's claim they hold.
var ErrClaimLost = errors.New("claim lost: another attempt owns it now")

// Classify maps an error from a settling transaction to ErrUnavailable,
// ErrContention or nil (anything else: possibly caused by a record). An
// error that already wraps ErrContention (a race the caller found itself)
// is contention.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	// No session, whatever the server said (not accepting connections,
	// a database or role gone, a password refused): nothing of a record's.
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return ErrUnavailable
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03": // serialization failure, deadlock, lock not available
			return ErrContention
		case "23505": // a concurrent transaction claimed the same key first
			switch parentConstraint(pgErr.ConstraintName) {
			case "identities_scope_key", "deliveries_pkey", "conflict_cases_key", "accounts_key",
				"dead_letters_source_key", "chains_pkey", "holds_pkey", "waiting_scope_key",
				"case_resolutions_case_key", "consumer_offsets_pkey", "periods_pkey",
				"ledger_entries_pkey",  // a second writer of an account from the same state (migration 0017)
				"idempotency_keys_key": // a key inserted without its lock, by an earlier version of settle
				return ErrContention
			}
			return nil
		case "57P01", "57P02", "57P03", "53300", "53400": // shutdown, crash, starting, too many connections
			return ErrUnavailable
		}
		if len(pgErr.Code) >= 2 && pgErr.Code[:2] == "08" { // connection exception class
			return ErrUnavailable
		}
		return nil
	}
	if errors.Is(err, ErrContention) { // a race the caller saw itself
		return ErrContention
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return ErrUnavailable
	}
	if errors.Is(err, net.ErrClosed) || isClosedConn(err) {
		return ErrUnavailable
	}
	return nil
}

func isClosedConn(err error) bool {
	// pgx reports a dead connection with these texts; there is no typed error
	// for them.
	s := err.Error()
	for _, t := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "failed to deallocate", "conn busy"} {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// Constraint names the constraint err violated as the schema names it (a
// tenant partition's copy under its parent's name), or "" for an error
// that names none.
func Constraint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return parentConstraint(pgErr.ConstraintName)
	}
	return ""
}

// parentConstraint is the name of the constraint that name belongs to: on a
// table partitioned by tenant (schema.Partition) a partition's copy is
// named after it with a suffix _pN.
func parentConstraint(name string) string {
	i := strings.LastIndex(name, "_p")
	if i < 0 || i+2 == len(name) {
		return name
	}
	for _, c := range name[i+2:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// Wrap adds what was being done, and ErrUnavailable when the
// database itself failed, so callers can tell an outage (wait) from a
// defect (report).
func Wrap(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if c := Classify(err); c != nil {
		return fmt.Errorf("%s: %w: %w", what, c, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
