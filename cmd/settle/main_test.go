package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/settletest"
)

func runArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), args, &out, &out)
	return code, out.String()
}

// TestExitCodes: help exits 0, a bad command, flag or file exits 2 (the
// exit codes of CONTRACT.md section 6).
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

// TestFlagBeatsEnvBeatsDefault: a flag beats its environment variable,
// which beats the default.
func TestFlagBeatsEnvBeatsDefault(t *testing.T) {
	parse := func(args ...string) cli {
		t.Helper()
		var c cli
		k, err := kong.New(&c, kong.Exit(func(int) {}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Parse(args); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := parse("run"); c.Run.AdminAddr != "127.0.0.1:8080" || c.Run.Brokers[0] != "127.0.0.1:9092" {
		t.Errorf("defaults: admin %s brokers %v", c.Run.AdminAddr, c.Run.Brokers)
	}
	t.Setenv("SETTLE_ADMIN_ADDR", "127.0.0.1:9999")
	t.Setenv("KAFKA_BROKERS", "a:1,b:2")
	t.Setenv("DATABASE_URL", "postgres://from-env/db")
	if c := parse("run"); c.Run.AdminAddr != "127.0.0.1:9999" || len(c.Run.Brokers) != 2 || c.Run.DatabaseURL != "postgres://from-env/db" {
		t.Errorf("environment: admin %s brokers %v database %s", c.Run.AdminAddr, c.Run.Brokers, c.Run.DatabaseURL)
	}
	t.Setenv("SETTLE_DATABASE_URL", "postgres://settle-env/db")
	if c := parse("run", "--admin-addr", "127.0.0.1:7777"); c.Run.AdminAddr != "127.0.0.1:7777" || c.Run.DatabaseURL != "postgres://settle-env/db" {
		t.Errorf("flag over environment: admin %s; SETTLE_DATABASE_URL over DATABASE_URL: %s", c.Run.AdminAddr, c.Run.DatabaseURL)
	}
}

// TestRecordKey: settle produce keys a record tenant_id/subject (a
// CloudEvent's tenantid too), as producers do, and leaves a record without
// them unkeyed.
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
// It says "no settle schema here", not "behind", and so does a read-only
// command.
func TestRunRefusesSchemaBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	// Closed by a cleanup, not a defer: the drop below is a cleanup too,
	// and runs first (cleanups run last-in, first-out).
	t.Cleanup(func() { admin.Close(context.Background()) })
	// The process id keeps two test runs on one server out of each other's way.
	name := fmt.Sprintf("settle_cmd_empty_%d", os.Getpid())
	if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	code, out := runArgs(t, "run", "--database-url", settletest.DatabaseURL(name), "--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0")
	if code != exitFailure || !strings.Contains(out, "settle migrate") || !strings.Contains(out, "no settle schema here") || strings.Contains(out, "behind") {
		t.Errorf("run on an empty database: exit %d, want 1 saying there is no settle schema and naming `settle migrate`:\n%s", code, out)
	}
	// A read-only command says so too.
	code, out = runArgs(t, "conflicts", "list", "--database-url", settletest.DatabaseURL(name))
	if code != exitFailure || !strings.Contains(out, "no settle schema here") || strings.Contains(out, "behind") {
		t.Errorf("conflicts list on an empty database: exit %d, want 1 saying there is no settle schema:\n%s", code, out)
	}
}

// TestRunStoppedWhileStarting: a SIGTERM that arrives while `settle run` is
// still connecting to PostgreSQL is a stop, not a failure: exit 0.
func TestRunStoppedWhileStarting(t *testing.T) {
	t.Parallel()
	// A listener that accepts and never answers: the connection hangs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background()) // as the signal handler's
	defer time.AfterFunc(300*time.Millisecond, cancel).Stop()
	var out bytes.Buffer
	code := run(ctx, []string{"run", "--database-url", "postgres://postgres@" + ln.Addr().String() + "/x?sslmode=disable",
		"--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0"}, &out, &out)
	if code != exitOK {
		t.Fatalf("stopped while connecting: exit %d, want 0:\n%s", code, out.String())
	}
}

// TestRunRefusesWebhookTimeoutPastLease: a webhook POST that could outlive
// its lease is a usage error reported before anything connects (the
// database URL here would hang), naming the flags to change.
func TestRunRefusesWebhookTimeoutPastLease(t *testing.T) {
	t.Parallel()
	code, out := runArgs(t, "run", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable",
		"--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0",
		"--webhook-url", "http://127.0.0.1:1/hook", "--webhook-lease", "3s", "--webhook-request-timeout", "2900ms")
	if code != exitUsage || !strings.Contains(out, "must be at most 2.7s") || !strings.Contains(out, "--webhook-lease") {
		t.Errorf("exit %d, want 2 with the bound and the flags:\n%s", code, out)
	}
	if code, out := runArgs(t, "run", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable",
		"--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0",
		"--webhook-url", "http://127.0.0.1:1/hook", "--webhook-lease", "3s", "--webhook-request-timeout", "2700ms"); code == exitUsage {
		t.Errorf("a timeout of nine tenths of the lease refused:\n%s", out)
	}
}

// TestRunRefusesBadDecoderFlags: a malformed --tenants entry or an
// out-of-range --record-bytes-max is a usage error naming the flag, before
// anything connects (the database here is unreachable).
func TestRunRefusesBadDecoderFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, value, want string }{
		{"--tenants=", "bad tenant!", `--tenants entry "bad tenant!"`},
		{"--record-bytes-max=-1", "", "--record-bytes-max -1 is out of range"},
	} {
		code, out := runArgs(t, "run", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable",
			"--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0", tc.flag+tc.value)
		if code != exitUsage || !strings.Contains(out, tc.want) || strings.Contains(out, "connect") {
			t.Errorf("settle run %s %q: exit %d, want 2 naming the flag before connecting:\n%s", tc.flag, tc.value, code, out)
		}
	}
}
