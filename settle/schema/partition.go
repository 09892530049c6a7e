package schema

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed partition.sql
var partitionSQL string

// TenantTables are the per-tenant tables: each has tenant_id in every
// primary, unique and foreign key, so each can be distributed by tenant
// (Citus: create_distributed_table(t, 'tenant_id'), co-located) or
// partitioned by hash of tenant_id. The others (consumer_offsets,
// webhook_subscriptions, prune_runs, schema_migrations) are global.
var TenantTables = []string{
	"accounts", "identities", "ledger_entries", "chains", "holds", "waiting", "conflict_cases",
	"case_resolutions", "delivery_repeats", "dead_letters", "outbox", "outbox_settlements", "outbox_queue", "outbox_parked",
	"periods", "idempotency_keys", "webhook_deliveries", "dead_letter_replays", "dead_letter_edits",
}

// PartitionsMax bounds Partition's partition count.
const PartitionsMax = 1024

// Partition rebuilds the per-tenant tables of a freshly migrated, empty
// database at conn as tables PARTITION BY HASH (tenant_id) with partitions
// partitions each, keeping their keys, indexes, triggers, foreign keys,
// grants and the views over them (partition.sql). PostgreSQL then holds
// every key to the rule a distributed PostgreSQL does: the distribution
// column is in each primary, unique and foreign key. It refuses a table
// with rows and leaves a table already partitioned as it is. conn must use
// the owner's credentials.
func Partition(ctx context.Context, conn *pgx.Conn, partitions int) error {
	if partitions < 1 || partitions > PartitionsMax {
		return fmt.Errorf("partition: %d hash partitions: give 1 to %d", partitions, PartitionsMax)
	}
	if err := Check(ctx, conn); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockKey)); err != nil {
			return fmt.Errorf("partition: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('settle.partitions', $1, true), set_config('settle.partitioned_tables', $2, true)`,
			strconv.Itoa(partitions), strings.Join(TenantTables, ",")); err != nil {
			return fmt.Errorf("partition: settings: %w", err)
		}
		if _, err := tx.Exec(ctx, partitionSQL); err != nil {
			return fmt.Errorf("partition tables by tenant: %w", err)
		}
		return nil
	})
}

// Partitions reads how many hash partitions the identities table has (0:
// not partitioned).
func Partitions(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('public.identities')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read partitions of identities: %w", err)
	}
	return n, nil
}

// PartitionSQL is the text Partition runs, for tools that fingerprint the
// schema.
func PartitionSQL() string { return partitionSQL }
