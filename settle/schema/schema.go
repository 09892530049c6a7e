// Package schema owns settle's database schema: the embedded, numbered,
// forward-only migrations, each applied in its own transaction with its
// version row, and the check that a database is at exactly the version this
// binary needs. It never touches the rows the migrations create.
//
// Each table has one owner, the package whose queries (its sql/ folder,
// generated per owner by sqlc.yaml) keep its rows right; another package
// may read it or, where said, write it:
//
//   - settle, the settling transaction (settle/sql): identities, accounts,
//     ledger_entries, chains, holds, waiting, conflict_cases,
//     case_resolutions, periods, consumer_offsets, dead_letters, deliveries,
//     outbox_settlements; settle/retention prunes them (prune_runs,
//     dead_letter_replays are its own).
//   - outbox, outbox_queue, outbox_parked: two writers. The settling
//     transaction inserts the rows (outbox_insert.sql,
//     outbox_settlements_insert.sql; a trigger queues them); relay/outbox
//     owns them after that: it leases the queue, reads, marks, requeues and
//     parks (relay/outbox/sql). settle/inspect lists the parked rows for
//     the analyst.
//   - idempotency_keys: edge/idempotency (edge/idempotency/sql), written
//     inside the settling transaction as its Rider.
//   - webhook_subscriptions, webhook_deliveries: edge/webhook/deliveries
//     (edge/webhook/deliveries/sql); a trigger on the outbox enqueues the
//     deliveries inside the settling transaction.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey serialises migrators: replicas started together migrate
// once (pg_advisory_xact_lock; an arbitrary constant, "settle" in ASCII).
const migrationLockKey = 0x736574746c65

// ReaderRole is the PostgreSQL role the read side and month end run under
// (migration 0005): SELECT on settle's tables and nothing else.
const ReaderRole = "settle_reader"

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions are numbered without gaps)", m.name, i+1)
		}
	}
	return ms, nil
}

// Version is the schema version this binary needs: the number of its
// embedded migrations.
func Version() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // embedded at build time: a broken set is a build defect
	}
	return len(ms)
}

// Migrate applies the embedded migrations that the database at conn lacks,
// each in its own transaction together with its schema_migrations row.
// Migrations only go forward; a database newer than this binary is an error.
// conn must use the owner's credentials. It returns the versions applied.
func Migrate(ctx context.Context, conn *pgx.Conn) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var applied []int
	for _, m := range ms {
		done, err := migrateOne(ctx, conn, m)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if done {
			applied = append(applied, m.version)
		}
	}
	current, err := DatabaseVersion(ctx, conn)
	if err != nil {
		return applied, err
	}
	if current > len(ms) {
		return applied, fmt.Errorf("migrate: database is at schema version %d, newer than this binary's %d: run a newer settle", current, len(ms))
	}
	// A per-tenant table a migration adds to a partitioned database is
	// partitioned like the others as soon as it exists (empty): the layout
	// stays one way, whichever release the database was partitioned at.
	if len(applied) > 0 {
		n, err := Partitions(ctx, conn)
		if err != nil {
			return applied, err
		}
		if n > 0 {
			if err := Partition(ctx, conn, n); err != nil {
				return applied, fmt.Errorf("migrate: partition the tables the migrations added: %w", err)
			}
		}
	}
	return applied, nil
}

func migrateOne(ctx context.Context, conn *pgx.Conn, m migration) (bool, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockKey)); err != nil {
		return false, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.Exec(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// ErrBehind is returned by Check when the database lacks
// migrations this binary needs.
var ErrBehind = errors.New("database schema is behind this binary")

// ErrNoSchema is returned by Check for a database without settle's schema
// (nothing migrated: another database, or a new one). It is ErrBehind too:
// `settle migrate` creates the schema.
var ErrNoSchema error = noSchema{}

type noSchema struct{}

func (noSchema) Error() string        { return "no settle schema here" }
func (noSchema) Is(target error) bool { return target == ErrBehind }

// DatabaseVersion reads the highest applied migration (0 on an empty
// database).
func DatabaseVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no schema_migrations: an empty database
			return 0, nil
		}
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Check refuses a database whose schema is not exactly this binary's:
// behind (run `settle migrate`) or ahead (run a newer settle).
func Check(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	have, err := DatabaseVersion(ctx, q)
	if err != nil {
		return err
	}
	want := Version()
	switch {
	case have == 0:
		return fmt.Errorf("%w: point --database-url at settle's database (under `settle dev`: settle_dev), or create the schema with `settle migrate` and the owner's URL", ErrNoSchema)
	case have < want:
		return fmt.Errorf("%w: it is at version %d, this settle needs %d; run `settle migrate` with the owner's DATABASE_URL (or --owner-url)", ErrBehind, have, want)
	case have > want:
		return fmt.Errorf("database schema is at version %d, newer than this settle's %d: upgrade settle", have, want)
	}
	return nil
}

// FS exposes the embedded migrations (read-only), for tools that
// fingerprint the schema.
func FS() fs.FS { return migrationFiles }
