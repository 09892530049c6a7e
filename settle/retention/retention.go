// Package retention removes settle's operational history and records
// what makes a row history: published outbox rows, repeated deliveries of
// closed periods, dead letters replayed (DeadLettersReplayed) or recorded
// before a cutoff. It never removes dedup state (an identity, a ledger
// row, an account, a chain, a hold, a waiting operation or a case) of any
// tenant but the canary's (package canary), whose whole accounts older
// than a cutoff it removes when asked (Options.CanaryBefore).
// The sweeper of package service prunes on a schedule, settle prune on
// demand; the dead-letter replays of the CLI and the analysts' page record
// where each dead letter went.
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// Store prunes the database of a settle.Store.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on s's database.
func New(s *settle.Store) *Store { return &Store{pool: s.Pool()} }

// Options says what Prune may remove beyond what is always operational
// history (published outbox rows, repeated deliveries of closed periods).
type Options struct {
	// DeadLettersBefore: dead letters recorded before it are removed, with
	// their replay rows. Zero keeps every dead letter not replayed.
	DeadLettersBefore time.Time
	// CanaryBefore: the canary tenant's accounts with nothing as new as it
	// are removed whole, with their identities, ledger rows, chains,
	// holds, cases and published messages (its counts are the tables'
	// names prefixed "canary_"). Zero keeps the canary's history. Callers
	// that take a retention from an operator hold it to CanaryKeepFloor.
	CanaryBefore time.Time
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// CanaryKeepFloor is the shortest canary retention: the canary writes one
// account a UTC day, and the account of yesterday must not go while a run
// or its redeliveries may still write it.
const CanaryKeepFloor = 48 * time.Hour

// Count is how many rows of one table Prune removed (or would).
type Count struct {
	Table string
	Rows  int64
}

// Prune removes operational history in one transaction, through the
// database's settle_prune function (migration 0009): the only DELETE the
// append-only guard lets through. Dedup state is kept: a redelivery of a
// record whose delivery row was pruned finds its identity and is answered
// duplicate with the stored response. The service role needs only EXECUTE
// on the function.
func (s *Store) Prune(ctx context.Context, opts Options) ([]Count, error) {
	var before *time.Time
	if !opts.DeadLettersBefore.IsZero() {
		before = &opts.DeadLettersBefore
	}
	var out []Count
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		rows, err := db.On(tx).Prune(ctx, db.PruneParams{DeadLettersBefore: before, DryRun: opts.DryRun})
		for _, r := range rows {
			out = append(out, Count{Table: pgq.Deref(r.TableName), Rows: pgq.Deref(r.Rows)})
		}
		if err != nil || opts.CanaryBefore.IsZero() {
			return err
		}
		cs, err := pruneCanary(ctx, tx, opts.CanaryBefore, opts.DryRun)
		out = append(out, cs...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prune operational history: %w", err)
	}
	return out, nil
}

// pruneCanary removes (or counts) the canary tenant's accounts with nothing
// as new as before, through settle_prune_canary (migration 0023), which
// names the tenant itself: no caller can aim it at another.
func pruneCanary(ctx context.Context, tx pgx.Tx, before time.Time, dryRun bool) ([]Count, error) {
	rows, err := db.On(tx).PruneCanary(ctx, db.PruneCanaryParams{Before: before, DryRun: dryRun})
	if err != nil {
		return nil, fmt.Errorf("canary history before %s: %w", before.Format(time.RFC3339), err)
	}
	out := make([]Count, len(rows))
	for i, r := range rows {
		out[i] = Count{Table: "canary_" + pgq.Deref(r.TableName), Rows: pgq.Deref(r.Rows)}
	}
	return out, nil
}

// DeadLettersReplayed records that the dead letters ids were replayed to
// the coordinates to (in the same order): a replayed dead letter is
// operational history that Prune removes.
func (s *Store) DeadLettersReplayed(ctx context.Context, ids []int64, to []message.Coordinates) error {
	if len(ids) != len(to) {
		return fmt.Errorf("record dead-letter replays: %d ids for %d coordinates", len(ids), len(to))
	}
	if len(ids) == 0 {
		return nil
	}
	r := db.DeadLetterReplayedParams{ID: ids, Topic: make([]string, len(to)), Partition: make([]int32, len(to)), Offset: make([]int64, len(to))}
	for i, c := range to {
		r.Topic[i], r.Partition[i], r.Offset[i] = c.Topic, c.Partition, c.Offset
	}
	if err := db.On(s.pool).DeadLetterReplayed(ctx, r); err != nil {
		return fmt.Errorf("record replays of dead letters %v: %w", ids, err)
	}
	return nil
}

// Edit is a correction of a dead letter about to be resent: the diff and
// the bytes to send, who made it and why.
type Edit struct {
	TenantID     string // the letter's
	DeadLetterID int64
	Diff         json.RawMessage // the fields changed: [{"field", "from", "to"}]
	Key, Value   []byte
	By, Reason   string
}

// Resent is an edit recorded and its record sent.
type Resent struct {
	EditID int64               `json:"edit_id"`
	By     string              `json:"edited_by"` // as recorded: a person's login, whatever By said (migration 0024)
	At     time.Time           `json:"at"`
	To     message.Coordinates `json:"to"`
}

// ErrEditRefused is an edit the database refused to the login: it reads
// only, or resolves without operating (migration 0024).
var ErrEditRefused = errors.New("editing a dead letter needs the role settle_operator")

// Resend records e and sends its record with send, in one transaction: the
// edit row first (where the database refuses a login that may not edit,
// before anything is sent), then send, then where the record went (a
// dead_letter_replays row naming the edit). A send that fails rolls the
// edit back: nothing is recorded of a record not sent. Only a commit that
// fails after the send leaves a resent record without its edit row; the
// record's ResendHeader still names its letter.
func (s *Store) Resend(ctx context.Context, e Edit, send func(ctx context.Context, editID int64) (message.Coordinates, error)) (*Resent, error) {
	var out Resent
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		row, err := db.On(tx).DeadLetterEditInsert(ctx, db.DeadLetterEditInsertParams{TenantID: e.TenantID, DeadLetterID: e.DeadLetterID,
			Diff: e.Diff, Key: e.Key, Value: e.Value, EditedBy: e.By, Reason: e.Reason})
		if err != nil {
			if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
				return fmt.Errorf("%w: %w", ErrEditRefused, err)
			}
			return err
		}
		out.EditID, out.By, out.At = row.ID, row.EditedBy, row.At
		if out.To, err = send(ctx, row.ID); err != nil {
			return err
		}
		return db.On(tx).DeadLetterResent(ctx, db.DeadLetterResentParams{TenantID: e.TenantID, DeadLetterID: e.DeadLetterID,
			Topic: out.To.Topic, Partition: out.To.Partition, ToOffset: out.To.Offset, EditID: &row.ID})
	})
	if err != nil {
		return nil, fmt.Errorf("resend dead letter %d: %w", e.DeadLetterID, err)
	}
	return &out, nil
}
