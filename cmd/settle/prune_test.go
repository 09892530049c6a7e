package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/schema"
	"github.com/settlehq/settle/settle/settletest"
)

// TestPruneCommand: `settle prune --dry-run` prints per table what it would
// remove and removes nothing; `settle prune` removes it and prints the
// same counts; identities stay.
func TestPruneCommand(t *testing.T) {
	t.Parallel()
	dbURL := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, dbURL, settle.Config{})
	ctx := context.Background()
	// Each record twice: the second deliveries (offsets 3-5) are repeats.
	recs := []map[string]any{settletest.Rec("record_id", "u-1"), settletest.Rec("record_id", "u-2"),
		settletest.Rec("record_id", "u-3", "account_period", "2026-12")}
	settletest.MustSettle(t, s, settletest.Batch(0, 0, recs...))
	settletest.MustSettle(t, s, settletest.Batch(0, 3, recs...))
	if _, err := s.ClosePeriod(ctx, "acme", "2026-11", "test"); err != nil {
		t.Fatal(err)
	}
	deliveries := func() int { return settletest.Count(t, s.Pool(), `SELECT count(*) FROM delivery_repeats`) }
	row := regexp.MustCompile(`(?m)^\s*delivery_repeats\s+2\s*$`)
	code, out := runArgs(t, "prune", "--dry-run", "--database-url", dbURL)
	if code != exitOK || !strings.Contains(out, "would remove") || !row.MatchString(out) || !strings.Contains(out, "outbox") ||
		!strings.Contains(out, "dead_letters") {
		t.Fatalf("settle prune --dry-run: exit %d, want 0 and per-table counts with delivery_repeats 2:\n%s", code, out)
	}
	if n := deliveries(); n != 3 {
		t.Fatalf("--dry-run removed rows: %d deliveries left of 3", n)
	}
	code, out = runArgs(t, "prune", "--database-url", dbURL, "--dead-letters-after", "720h")
	if code != exitOK || !strings.Contains(out, "removed") || !row.MatchString(out) {
		t.Fatalf("settle prune: exit %d, want 0 and delivery_repeats 2 removed:\n%s", code, out)
	}
	if n, ids := deliveries(), settletest.Count(t, s.Pool(), `SELECT count(*) FROM identities`); n != 1 || ids != 3 {
		t.Fatalf("after prune: %d delivery repeats (want 1, the open period's), %d identities (want 3)", n, ids)
	}
}

// TestMigrateHashPartitions: `settle migrate --hash-partitions 4` on a new
// database leaves every per-tenant table partitioned in 4 by tenant_id; a
// second run changes nothing; a database with rows is refused.
func TestMigrateHashPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("settle_migrate_h_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	// Dropped at cleanup, on the admin connection, which closes after it (a
	// deferred close ran before the cleanup and left every run's database).
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		_ = admin.Close(context.Background())
	})
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	dbURL := settletest.DatabaseURL(name)
	for range 2 {
		if code, out := runArgs(t, "migrate", "--owner-url", dbURL, "--hash-partitions", "4"); code != exitOK {
			t.Fatalf("settle migrate --hash-partitions 4: exit %d\n%s", code, out)
		}
	}
	pool := settletest.PoolOn(t, dbURL, 2)
	if n := settletest.Count(t, pool, `SELECT count(*) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid`); n != len(schema.TenantTables) {
		t.Fatalf("%d partitioned tables, want %d", n, len(schema.TenantTables))
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox'::regclass`); n != 4 {
		t.Fatalf("outbox has %d partitions, want 4", n)
	}
	other := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, other, settle.Config{})
	settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Rec()))
	if code, out := runArgs(t, "migrate", "--owner-url", other, "--hash-partitions", "4"); code == exitOK || !strings.Contains(out, "has rows") {
		t.Fatalf("--hash-partitions on a database with rows: exit %d, want a refusal naming the rows\n%s", code, out)
	}
}

// TestPruneCanaryKeep: `settle prune --canary-keep` below 48h is refused
// (exit 2, naming the minimum); with 48h it lists the canary's tables
// beside the others and keeps the canary's new identities.
func TestPruneCanaryKeep(t *testing.T) {
	t.Parallel()
	dbURL := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, dbURL, settle.Config{})
	settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Rec("tenant_id", "settle-canary", "subject", "canary-20261101")))
	if code, out := runArgs(t, "prune", "--database-url", dbURL, "--canary-keep", "1h"); code != exitUsage || !strings.Contains(out, "at least 48h") {
		t.Fatalf("settle prune --canary-keep 1h: exit %d, want 2 naming the minimum:\n%s", code, out)
	}
	code, out := runArgs(t, "prune", "--database-url", dbURL, "--canary-keep", "48h")
	if code != exitOK || !regexp.MustCompile(`(?m)^\s*canary_identities\s+0\s*$`).MatchString(out) || !strings.Contains(out, "every tenant but the canary") {
		t.Fatalf("settle prune --canary-keep 48h: exit %d, want 0 and canary_identities 0:\n%s", code, out)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM identities`); n != 1 {
		t.Fatalf("%d identities after a prune keeping 48h of the canary, want 1", n)
	}
}
