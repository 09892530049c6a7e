package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/settletest"
)

// TestDevDatabaseURL: the address settle dev prints for its database is the
// URL form the README exports, and it leads back to the same server and
// database (a TCP host, and a private server's socket directory).
func TestDevDatabaseURL(t *testing.T) {
	for _, tc := range []struct {
		host string
		port uint16
		want string
	}{
		{"127.0.0.1", 5432, "postgres://postgres@127.0.0.1:5432/settle_dev"},
		{"/tmp/settle-pg-1", 41234, "postgres://postgres@/settle_dev?host=%2Ftmp%2Fsettle-pg-1&port=41234"},
	} {
		cfg, err := pgx.ParseConfig("user=postgres dbname=settle_dev")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Host, cfg.Port = tc.host, tc.port
		got := databaseURL(cfg)
		if got != tc.want {
			t.Errorf("databaseURL(%s:%d) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
		back, err := pgx.ParseConfig(got)
		if err != nil {
			t.Fatalf("%s does not parse: %v", got, err)
		}
		if back.Host != tc.host || back.Port != tc.port || back.User != "postgres" || back.Database != "settle_dev" {
			t.Errorf("%s parses as %s:%d user %s database %s", got, back.Host, back.Port, back.User, back.Database)
		}
	}
}

// TestDevResetsTheDatabaseItsURLNames: with DATABASE_URL exported as
// settle dev's hints say (naming the dev database itself), settle dev run
// again resets that database: it failed with "cannot drop the currently
// open database" (55006), after saying it had.
func TestDevResetsTheDatabaseItsURLNames(t *testing.T) {
	server, err := pgx.ParseConfig(settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	c := &devCmd{Database: fmt.Sprintf("settle_dev_reset_%d", os.Getpid())}
	ctx := context.Background()
	first, err := c.claimDatabase(ctx, server) // the first run
	if err != nil {
		t.Fatal(err)
	}
	defer dropTestDatabase(ctx, server, c.Database)
	first.Close(ctx) // the first run ends
	own := server.Copy()
	own.Database = c.Database
	second, err := c.claimDatabase(ctx, own)
	if err != nil {
		t.Fatalf("settle dev with DATABASE_URL naming its database: %v", err)
	}
	second.Close(ctx)
}

// TestDevLeavesItsDatabaseToOtherSessions: settle dev drops its own
// database without FORCE: with another session connected to it (a psql of
// the user's) it refuses, names that session and says what to do, and the
// data stays.
func TestDevLeavesItsDatabaseToOtherSessions(t *testing.T) {
	server, err := pgx.ParseConfig(settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	c := &devCmd{Database: fmt.Sprintf("settle_dev_sessions_%d", os.Getpid())}
	ctx := context.Background()
	first, err := c.claimDatabase(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer dropTestDatabase(ctx, server, c.Database)
	first.Close(ctx)
	userCfg := first.cfg.Copy()
	userCfg.RuntimeParams["application_name"] = "a psql of the user's"
	user, err := pgx.ConnectConfig(ctx, userCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close(ctx)
	if _, err := user.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	second, err := c.claimDatabase(ctx, server)
	if err == nil {
		second.Close(ctx)
		t.Fatal("settle dev dropped its database with another session connected to it")
	}
	if msg := err.Error(); !strings.Contains(msg, "a psql of the user's") || !strings.Contains(msg, "--database "+c.Database+"_2") {
		t.Errorf("the refusal does not name the session and another --database: %v", err)
	}
	var n int
	if err := user.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the user's session after the refusal: %d rows, %v; want 1 row", n, err)
	}
}

// dropTestDatabase drops a database a test made.
func dropTestDatabase(ctx context.Context, server *pgx.ConnConfig, name string) {
	if conn, err := pgx.ConnectConfig(ctx, server); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") // best effort: the test made it
		_ = conn.Close(ctx)
	}
}
