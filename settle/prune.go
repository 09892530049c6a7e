package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var sqlPrune = mustQuery("prune.sql")

// PruneOptions says what Prune may remove beyond what is always
// operational history (published outbox rows, repeated deliveries of closed
// periods).
type PruneOptions struct {
	// DeadLettersBefore: dead letters recorded before it are removed, with
	// their replay rows. Zero keeps every dead letter not replayed.
	DeadLettersBefore time.Time
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// PruneCount is how many rows of one table Prune removed (or would).
type PruneCount struct {
	Table string
	Rows  int64
}

// Prune removes operational history in one transaction, through the
// database's settle_prune function (migration 0009): the only DELETE the
// append-only guard lets through. It never removes an identity, a ledger
// row, an account, a chain, a hold, a waiting operation or a case, so
// dedup state is kept: a redelivery of a record whose delivery row was
// pruned finds its identity and is answered duplicate with the stored
// response. The service role needs only EXECUTE on the function.
func (s *Store) Prune(ctx context.Context, opts PruneOptions) ([]PruneCount, error) {
	var before *time.Time
	if !opts.DeadLettersBefore.IsZero() {
		before = &opts.DeadLettersBefore
	}
	var out []PruneCount
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlPrune, before, opts.DryRun)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PruneCount, error) {
			var c PruneCount
			return c, r.Scan(&c.Table, &c.Rows)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prune operational history: %w", err)
	}
	return out, nil
}

var sqlDeadLetterReplayed = mustQuery("dead_letter_replayed.sql")

// DeadLettersReplayed records that the dead letters ids were replayed to
// the coordinates to (in the same order): a replayed dead letter is
// operational history that Prune removes.
func (s *Store) DeadLettersReplayed(ctx context.Context, ids []int64, to []Coordinates) error {
	if len(ids) != len(to) {
		return fmt.Errorf("record dead-letter replays: %d ids for %d coordinates", len(ids), len(to))
	}
	if len(ids) == 0 {
		return nil
	}
	topics, parts, offs := make([]string, len(to)), make([]int32, len(to)), make([]int64, len(to))
	for i, c := range to {
		topics[i], parts[i], offs[i] = c.Topic, c.Partition, c.Offset
	}
	if _, err := s.pool.Exec(ctx, sqlDeadLetterReplayed, ids, topics, parts, offs); err != nil {
		return fmt.Errorf("record replays of dead letters %v: %w", ids, err)
	}
	return nil
}
