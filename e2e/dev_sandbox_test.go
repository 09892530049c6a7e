package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/settletest"
)

// countRows counts the rows of table in database db on the test server.
func countRows(t *testing.T, db, table string) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, settletest.DatabaseURL(db))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n)
	return n, err
}

// TestDevSecondSandboxLeavesTheFirstWhole: with one `settle dev` running
// on a database, a second one on the same database exits with an error
// that says what to change (a busy admin port: --admin-addr; a busy Kafka
// port: --kafka-addr; the same database with free ports: the first one's
// process and --database), and the first one's data is whole afterwards
// and the first one still runs. Before, the second one dropped the
// database WITH (FORCE) and recreated it empty before it found the admin
// port taken, and with free ports it simply took the database over.
func TestDevSecondSandboxLeavesTheFirstWhole(t *testing.T) {
	t.Parallel()
	db := fmt.Sprintf("settle_e2e_sandbox_%d", os.Getpid())
	t.Cleanup(func() { dropDatabase(db) })
	kafka, admin := testnet.FreeAddr(t), testnet.FreeAddr(t)
	first := startSettle(t, "dev-first", nil, "dev", "--kafka-addr", kafka, "--admin-addr", admin,
		"--database-url", settletest.ServerURL(), "--database", db)
	waitOutput(t, first, 3*time.Minute, regexp.MustCompile(`(?m)^\s+16 records: `), regexp.MustCompile(`try next`))
	deliveries, err := countRows(t, db, "deliveries")
	if err != nil || deliveries == 0 {
		t.Fatalf("the first sandbox's deliveries after its sample: %d, %v", deliveries, err)
	}

	for _, tc := range []struct {
		name, kafka, admin string
		hint               *regexp.Regexp // what the refusal tells the user to change
	}{
		{"busy admin port", testnet.FreeAddr(t), admin, regexp.MustCompile(`--admin-addr`)},
		{"busy kafka port", kafka, testnet.FreeAddr(t), regexp.MustCompile(`--kafka-addr`)},
		{"same database", testnet.FreeAddr(t), testnet.FreeAddr(t),
			regexp.MustCompile(fmt.Sprintf(`(?s)pid %d\b.*--database`, first.Pid()))},
	} {
		second := startSettle(t, "dev-second-"+strings.ReplaceAll(tc.name, " ", "-"), nil, "dev",
			"--kafka-addr", tc.kafka, "--admin-addr", tc.admin, "--database-url", settletest.ServerURL(), "--database", db, "--no-sample")
		if !second.WaitExit(time.Minute) {
			second.Kill()
			t.Errorf("%s: the second settle dev still runs after a minute, on the first one's database", tc.name)
		} else if code := second.ExitCode(0); code == 0 {
			t.Errorf("%s: the second settle dev exited 0", tc.name)
		} else if log := second.Log(); !tc.hint.MatchString(log) {
			t.Errorf("%s: the second settle dev's refusal does not match %s:\n%s", tc.name, tc.hint, log)
		}
		if n, err := countRows(t, db, "deliveries"); err != nil || n != deliveries {
			t.Errorf("%s: after the second settle dev, the first one's database has %d deliveries (%v), want %d", tc.name, n, err, deliveries)
		}
		if first.Exited() {
			t.Fatalf("%s: the first settle dev exited (code %d)", tc.name, first.ExitCode(0))
		}
	}
}

// TestDevRefusesADatabaseItDidNotCreate: `settle dev --database NAME` on a
// database that exists and that settle dev did not create (it carries no
// marker of settle dev's) exits with an error that says what to do, and
// the database keeps its table and rows. Before, it was dropped WITH
// (FORCE) and recreated as a sandbox.
func TestDevRefusesADatabaseItDidNotCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := fmt.Sprintf("settle_e2e_notdev_%d", os.Getpid())
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDatabase(db) })
	mine, err := pgx.Connect(ctx, settletest.DatabaseURL(db))
	if err != nil {
		t.Fatal(err)
	}
	_, err = mine.Exec(ctx, `CREATE TABLE precious (v int); INSERT INTO precious VALUES (1), (2), (3)`)
	mine.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}

	p := startSettle(t, "dev-notdev", nil, "dev", "--kafka-addr", testnet.FreeAddr(t), "--admin-addr", testnet.FreeAddr(t),
		"--database-url", settletest.ServerURL(), "--database", db, "--no-sample")
	if !p.WaitExit(time.Minute) {
		p.Kill()
		t.Errorf("settle dev --database %s still runs after a minute, on a database it did not create", db)
	} else if code := p.ExitCode(0); code == 0 {
		t.Errorf("settle dev --database %s exited 0", db)
	} else if log := p.Log(); !strings.Contains(log, "did not create") || !strings.Contains(log, "--database") {
		t.Errorf("settle dev --database %s: the refusal does not say it did not create it and what to do (--database):\n%s", db, log)
	}
	if n, err := countRows(t, db, "precious"); err != nil || n != 3 {
		t.Errorf("after settle dev --database %s, its table has %d rows (%v), want 3", db, n, err)
	}
}
