// Package e2e proves the pipeline from outside: it builds the real `settle`
// binary once, runs it as separate processes against an in-process
// Kafka-protocol broker (kfake) on loopback and the machine's PostgreSQL,
// kills and stops them, and checks the contract's invariants afterwards.
//
// Tests only. Nothing here is imported by production code.
package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/proctest"
	"github.com/settlehq/settle/settle/settletest"
)

// TestMain removes the settle binary the tests built, after them.
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }

// startSettle starts `settle args...` with env added to a clean
// environment. The process is killed at cleanup if still running, and its
// log is printed when the test failed.
func startSettle(t *testing.T, name string, env []string, args ...string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, proctest.Options{Name: name, Env: env, Args: args})
}

// signal sends sig to p, failing the test if it cannot.
func signal(t *testing.T, p *proctest.Process, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Error(err)
	}
}

// emptyDatabase creates an empty database (no schema) on the test server,
// dropped at cleanup, and returns its URL: `settle migrate` is run on it by
// the test, as an operator would.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatalf("connect to %s: %v (start PostgreSQL, or set SETTLE_TEST_DATABASE_URL)", settletest.ServerURL(), err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("settle_e2e_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDatabase(name) })
	return settletest.DatabaseURL(name)
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	// Best effort, like the connect above: a database left behind is
	// dropped by the next run that takes its name.
	_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
}

// migrateDB runs `settle migrate` on url and fails the test unless it
// exits 0.
func migrateDB(t *testing.T, url string) {
	t.Helper()
	p := startSettle(t, "migrate", nil, "migrate", "--owner-url", url)
	if code := p.ExitCode(time.Minute); code != 0 {
		t.Fatalf("settle migrate: exit %d\n%s", code, p.Log())
	}
}
