// Package settletest gives each test its own PostgreSQL database, cloned from a
// migrated template. It is test support only: production code must never
// import it.
//
// The server is SETTLE_TEST_DATABASE_URL, else the machine's PostgreSQL at
// postgres://postgres@127.0.0.1:5432/postgres. An unreachable server fails
// the test: a test that needs PostgreSQL never skips silently.
package settletest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/pgcluster"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/schema"
)

// ServerURL is the admin URL of the test server.
func ServerURL() string {
	if u := os.Getenv("SETTLE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// TestPartitions is how many hash partitions by tenant_id the partitioned
// test databases give each per-tenant table (NewPartitionedDatabase).
const TestPartitions = 4

var templates struct {
	sync.Mutex
	made map[int]string // by hash partitions (0: plain tables)
}

// template creates (once per server, schema and layout) a migrated
// template database named after the hash of the embedded migrations;
// partitions > 0 also partitions its per-tenant tables (schema.Partition),
// and the name hashes the partitioning's text and table list too.
func template(ctx context.Context, partitions int) (string, error) {
	templates.Lock()
	defer templates.Unlock()
	if name, ok := templates.made[partitions]; ok {
		return name, nil
	}
	h := sha256.New()
	_ = fs.WalkDir(schema.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(schema.FS(), p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	name := "settle_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
	if partitions > 0 {
		h.Write([]byte(schema.PartitionSQL()))
		h.Write([]byte(strings.Join(schema.TenantTables, ",")))
		name = fmt.Sprintf("settle_tmpl_%s_h%d", hex.EncodeToString(h.Sum(nil))[:12], partitions)
	}
	if err := createTemplate(ctx, name, partitions); err != nil {
		return "", err
	}
	if templates.made == nil {
		templates.made = map[int]string{}
	}
	templates.made[partitions] = name
	return name, nil
}

func createTemplate(ctx context.Context, name string, partitions int) error {
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return fmt.Errorf("settletest: connect to %s: %w (start PostgreSQL, or set SETTLE_TEST_DATABASE_URL)", ServerURL(), err)
	}
	defer admin.Close(ctx)
	// Test packages run as parallel processes: one creates the template,
	// the others wait on this lock and find it made.
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7270741)`); err != nil {
		return fmt.Errorf("settletest: lock template %s: %w", name, err)
	}
	// An unlock that fails changes nothing: closing the session (deferred
	// above) releases the lock as well.
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7270741)`) }()
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("settletest: look up template %s: %w", name, err)
	}
	if exists {
		return nil
	}
	building := name + "_build"
	_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+building)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+building); err != nil {
		return fmt.Errorf("settletest: create database %s: %w", building, err)
	}
	conn, err := pgx.Connect(ctx, DatabaseURL(building))
	if err != nil {
		return fmt.Errorf("settletest: connect to %s: %w", building, err)
	}
	if _, err := schema.Migrate(ctx, conn); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("settletest: migrate template: %w", err)
	}
	if partitions > 0 {
		if err := schema.Partition(ctx, conn, partitions); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("settletest: partition template: %w", err)
		}
	}
	conn.Close(ctx)
	if _, err = admin.Exec(ctx, `ALTER DATABASE `+building+` RENAME TO `+name); err != nil {
		return fmt.Errorf("settletest: rename %s to %s: %w", building, name, err)
	}
	return nil
}

// DatabaseURL is the URL of database name on the test server.
func DatabaseURL(name string) string { return pgcluster.WithDatabase(ServerURL(), name) }

var seq struct {
	sync.Mutex
	n int
}

// NewDatabase creates an empty, migrated database for t, dropped at cleanup,
// and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, 0)
}

// NewPartitionedDatabase is NewDatabase with every per-tenant table
// PARTITION BY HASH (tenant_id) in TestPartitions partitions
// (schema.Partition): the key rules of a database distributed by tenant.
func NewPartitionedDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, TestPartitions)
}

func newDatabase(t testing.TB, partitions int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmpl, err := template(ctx, partitions)
	if err != nil {
		t.Fatalf("settletest: %v", err)
	}
	seq.Lock()
	seq.n++
	name := fmt.Sprintf("settle_t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, seq.n)
	seq.Unlock()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		t.Fatalf("settletest: connect to %s: %v (start PostgreSQL, or set SETTLE_TEST_DATABASE_URL)", ServerURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+tmpl); err != nil {
		t.Fatalf("settletest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			return
		}
		defer admin.Close(ctx)
		_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	return DatabaseURL(name)
}

// NewPool creates a database for t and a pool on it, closed at cleanup.
func NewPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return PoolOn(t, NewDatabase(t), maxConns)
}

// PoolOn opens a pool on the database at url, closed at cleanup.
func PoolOn(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return pool(t, url, maxConns, nil)
}

// AppPoolOn opens a pool on the database at url whose every session runs
// as the service role settle_app (SET ROLE), so that what runs on it has
// only the grants the migrations give the service. Closed at cleanup.
func AppPoolOn(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return pool(t, url, maxConns, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE settle_app")
		return err
	})
}

func pool(t testing.TB, url string, maxConns int32, afterConnect func(context.Context, *pgx.Conn) error) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.AfterConnect = afterConnect
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewStore creates a database for t and a Store on it.
func NewStore(t testing.TB, cfg settle.Config) *settle.Store {
	t.Helper()
	return NewStoreOn(t, NewDatabase(t), cfg)
}

// NewStoreOn opens a Store on the database at url (from NewDatabase or
// NewPartitionedDatabase).
func NewStoreOn(t testing.TB, url string, cfg settle.Config) *settle.Store {
	t.Helper()
	return StoreOn(t, PoolOn(t, url, 16), cfg)
}

// StoreOn opens a Store on pool: a test that needs the pool's size (one
// connection: one statement cache) or its sessions' role.
func StoreOn(t testing.TB, pool *pgxpool.Pool, cfg settle.Config) *settle.Store {
	t.Helper()
	s, err := settle.Open(context.Background(), pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// DropLastSettlement is SQL for Bypass that removes the settlement with the
// highest outbox id from the outbox, as if it had never been written: its
// element of its outbox_settlements row, or the row when it holds no other.
const DropLastSettlement = `WITH m AS (SELECT max(id) AS id FROM outbox_messages WHERE topic = 'settlements'),
     r AS (SELECT s.tenant_id, s.id, cardinality(s.ids) AS n FROM outbox_settlements s, m WHERE m.id = ANY (s.ids)),
     d AS (DELETE FROM outbox_settlements s USING r WHERE r.n = 1 AND s.tenant_id = r.tenant_id AND s.id = r.id)
UPDATE outbox_settlements s
   SET ids = s.ids[1:r.n - 1], identity_ids = s.identity_ids[1:r.n - 1], keys = s.keys[1:r.n - 1],
       sequences = s.sequences[1:r.n - 1], kinds = s.kinds[1:r.n - 1], headers = s.headers[1:r.n - 1]
  FROM r WHERE r.n > 1 AND s.tenant_id = r.tenant_id AND s.id = r.id`

// Bypass runs sql with the append-only triggers off (session_replication_role
// = replica, as the owner), in a transaction of its own on db (a pool, a
// connection): for tests that corrupt state on purpose, as only a defect or
// an operator could.
func Bypass(t testing.TB, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TuplesRead is how many rows of table its sequential scans (seq) and its
// indexes (idx) have read so far, by the statistics of the database at
// url. pool must be the one connection whose reads are counted (a pool of
// 1): it is asked to flush its statistics first, which a backend does
// before it reports itself ready for the next statement.
func TuplesRead(t testing.TB, pool *pgxpool.Pool, url, table string) (seq, idx int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	// Without track_counts every count stays 0 and a test of "reads no
	// rows" would pass whatever the plans do.
	var counting bool
	if err := reader.QueryRow(ctx, "SELECT current_setting('track_counts')::boolean").Scan(&counting); err != nil || !counting {
		t.Fatalf("settletest: the server does not count table reads (track_counts %v, %v): turn it on", counting, err)
	}
	if err := reader.QueryRow(ctx, `SELECT coalesce(t.seq_tup_read, 0),
	       (SELECT coalesce(sum(i.idx_tup_read), 0)::bigint FROM pg_stat_user_indexes i WHERE i.relid = t.relid)
	  FROM pg_stat_user_tables t WHERE t.relname = $1`, table).Scan(&seq, &idx); err != nil {
		t.Fatal(err)
	}
	return seq, idx
}

// Frozen turns autovacuum off on tables, so that their statistics stay as
// old as what they held then: the plan tests grow a table faster than it
// would be analysed.
func Frozen(t testing.TB, pool *pgxpool.Pool, tables ...string) {
	t.Helper()
	for _, table := range tables {
		if _, err := pool.Exec(context.Background(), "ALTER TABLE "+pgx.Identifier{table}.Sanitize()+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
}

// GrowIdentities adds n identities to the database, copies of its first
// under new record ids (grown-1 …): its tenant's identities as many as a busy
// tenant's, without settling them.
func GrowIdentities(t testing.TB, pool *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO identities (tenant_id, account_period, record_id, operation, fingerprint, canonical_version,
		                        canonical, outcome, reason, response, subject, currency, account_id, source, topic,
		                        partition, "offset", first_seen_at, last_attempted_at, attempts)
		SELECT tenant_id, account_period, 'grown-' || g, operation, fingerprint, canonical_version, canonical, outcome,
		       reason, response, subject, currency, account_id, source, topic, partition, -g, first_seen_at,
		       last_attempted_at, attempts
		  FROM (SELECT * FROM identities ORDER BY id LIMIT 1) i, generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
}
