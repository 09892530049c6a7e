package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/pgtest"
)

func runArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), args, &out, &out)
	return code, out.String()
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, exitOK},
		{[]string{"run", "--help"}, exitOK},
		{[]string{"bogus"}, exitUsage},
		{[]string{"run", "--no-such-flag"}, exitUsage},
		{[]string{"produce", "--brokers", "127.0.0.1:1", "/no/such/file"}, exitUsage},
	} {
		if code, out := runArgs(t, tc.args...); code != tc.code {
			t.Errorf("settle %v: exit %d, want %d\n%s", tc.args, code, tc.code, out)
		}
	}
}

func TestFlagBeatsEnvBeatsDefault(t *testing.T) {
	t.Setenv("SETTLE_ADMIN_ADDR", "127.0.0.1:9999")
	t.Setenv("KAFKA_BROKERS", "a:1,b:2")
	code, out := runArgs(t, "run", "--help")
	if code != exitOK || !strings.Contains(out, `--admin-addr="127.0.0.1:9999"`) || !strings.Contains(out, "a:1,b:2") {
		t.Errorf("help does not show environment values as defaults:\n%s", out)
	}
}

func TestRecordKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"tenant_id":"acme","subject":"cust-1","amount":"1"}`:       "acme/cust-1",
		`{"specversion":"1.0","tenantid":"acme","subject":"cust-2"}`: "acme/cust-2",
		`{"tenant_id":"acme"}`: "",
		`not json`:             "",
	} {
		if got := string(recordKey([]byte(in))); got != want {
			t.Errorf("recordKey(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestRunRefusesSchemaBehind: an empty database is behind this binary's
// schema; run refuses it (exit 1, saying to migrate) instead of starting.
func TestRunRefusesSchemaBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := "settle_cmd_empty_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	code, out := runArgs(t, "run", "--database-url", pgtest.DatabaseURL(name), "--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0")
	if code != exitFailure || !strings.Contains(out, "settle migrate") {
		t.Errorf("run on an empty database: exit %d, want 1 naming `settle migrate`:\n%s", code, out)
	}
}
