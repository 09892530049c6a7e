package main

import (
	"context"
	"fmt"
	"os"
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
	if _, err := c.resetDatabase(ctx, server); err != nil { // the first run
		t.Fatal(err)
	}
	defer func() {
		if conn, err := pgx.ConnectConfig(ctx, server); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+c.Database+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	}()
	own := server.Copy()
	own.Database = c.Database
	if _, err := c.resetDatabase(ctx, own); err != nil {
		t.Fatalf("settle dev with DATABASE_URL naming its database: %v", err)
	}
}
