package pgcluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startCluster starts a cluster for t and registers Stop. It skips only when
// PostgreSQL is genuinely not installed on a developer machine: under CI
// (any value of $CI) a missing binary fails, because a CI job that silently
// skips these tests would look green while testing nothing.
func startCluster(t *testing.T, ctx context.Context, opts Options) *Cluster {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		if _, ci := os.LookupEnv("CI"); !ci && errors.Is(err, ErrBinariesNotFound) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	start := time.Now()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster started in %v at %s", time.Since(start).Round(time.Millisecond), c.Dir())
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func connect(t *testing.T, ctx context.Context, c *Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect %s: %v", c.DSN("postgres"), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func countRows(t *testing.T, ctx context.Context, c *Cluster) int {
	t.Helper()
	var n int
	if err := connect(t, ctx, c).QueryRow(ctx, "SELECT count(*) FROM survivors").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLifecycle: a private cluster starts on a socket directory, keeps its
// address and its data across an immediate restart (crash recovery, which
// cuts the connections) and a clean one, and refuses connections once killed.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startCluster(t, ctx, Options{})

	if !strings.Contains(c.DSN("postgres"), "host=") {
		t.Errorf("unix-socket DSN %q has no host parameter", c.DSN("postgres"))
	}
	conn := connect(t, ctx, c)
	if _, err := conn.Exec(ctx, "CREATE TABLE survivors (id int); INSERT INTO survivors VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}

	port, dsn := c.Port(), c.DSN("postgres")
	start := time.Now()
	if err := c.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("immediate restart took %v", time.Since(start).Round(time.Millisecond))
	if c.Port() != port || c.DSN("postgres") != dsn {
		t.Fatalf("restart changed address: %s -> %s", dsn, c.DSN("postgres"))
	}
	// The old connection was cut by the restart.
	if err := conn.Ping(ctx); err == nil {
		t.Error("connection survived an immediate restart")
	}
	if n := countRows(t, ctx, c); n != 2 {
		t.Fatalf("after immediate restart: %d rows, want 2", n)
	}

	if err := c.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, ctx, c); n != 2 {
		t.Fatalf("after fast restart: %d rows, want 2", n)
	}

	// Kill with a connection open, so a backend outlives the postmaster
	// for a moment, as in a real crash.
	if _, err := connect(t, ctx, c).Exec(ctx, "INSERT INTO survivors VALUES (3)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, c.DSN("postgres")); err == nil {
		t.Fatal("connected to a killed cluster")
	}
	if err := c.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartAgain(ctx); err == nil {
		t.Error("StartAgain on a running cluster succeeded")
	}
	if n := countRows(t, ctx, c); n != 3 {
		t.Fatalf("after kill and crash recovery: %d rows, want 3", n)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s behind (stat: %v)", c.Dir(), err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := c.StartAgain(ctx); err == nil {
		t.Error("StartAgain after Stop removed the directory succeeded")
	}
}

// TestTCPAndOwnDir: a private cluster in a directory the caller names
// listens on loopback TCP.
func TestTCPAndOwnDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not t.TempDir(): as root its 0700 parents keep the postgres user out.
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	c := startCluster(t, ctx, Options{Dir: dir, Listen: "127.0.0.1"})
	if !strings.HasPrefix(c.DSN("postgres"), "postgres://postgres@127.0.0.1:") {
		t.Errorf("TCP DSN = %q", c.DSN("postgres"))
	}
	if _, err := connect(t, ctx, c).Exec(ctx, "CREATE TABLE survivors (id int); INSERT INTO survivors VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// A caller-owned Dir survives Stop and can be started again.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir() + "/data/PG_VERSION"); err != nil {
		t.Fatalf("Stop removed a caller-provided dir: %v", err)
	}
	if err := c.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, ctx, c); n != 1 {
		t.Fatalf("after Stop and StartAgain: %d rows, want 1", n)
	}
	// Start on an existing cluster reuses it instead of re-running initdb.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	c2 := startCluster(t, ctx, Options{Dir: dir})
	if n := countRows(t, ctx, c2); n != 1 {
		t.Fatalf("reused cluster: %d rows, want 1", n)
	}
}

// TestStartFailureQuotesLog: a cluster that cannot start reports the tail of
// the server's log in its error.
func TestStartFailureQuotesLog(t *testing.T) {
	t.Parallel()
	if _, err := FindBinaries(); err != nil {
		t.Skip("covered by the other tests' skip/fail logic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An unresolvable listen address makes postmaster exit at startup.
	_, err := Start(ctx, Options{Listen: "no-such-host.invalid"})
	if err == nil {
		t.Fatal("Start succeeded with an unresolvable listen address")
	}
	if !strings.Contains(err.Error(), "tail of server log") {
		t.Errorf("error does not quote the server log:\n%v", err)
	}
	t.Logf("expected failure:\n%v", err)
}

// TestWithDatabase: the database name is swapped and the rest of the URL
// (user, host, parameters) kept, for a cluster's socket URL too.
func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/settle_x?sslmode=disable"},
		{"postgres://u:p@db:5432/app", "postgres://u:p@db:5432/settle_x"},
		{"postgres://postgres@/postgres?host=%2Ftmp%2Fpg&port=5433", "postgres://postgres@/settle_x?host=%2Ftmp%2Fpg&port=5433"},
		{"postgres:///postgres?host=/var/run/postgresql", "postgres:///settle_x?host=/var/run/postgresql"},
	} {
		if got := WithDatabase(c.in, "settle_x"); got != c.want {
			t.Errorf("WithDatabase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
