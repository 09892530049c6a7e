package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/reconcile"
)

// TestMonthEndCommands: settle reconcile --source exits 0 on an export of
// what was settled and 3 with a report on one that is not; settle
// statement prints the period in text, JSON and CSV, its closing equal to
// the balance.
func TestMonthEndCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := []string{
		acmeRecord(`"record_id":"g","kind":"grant","amount":"100","currency":"USD"`),
		acmeRecord(`"record_id":"u","kind":"usage","amount":"30","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
		acmeRecord(`"record_id":"c","kind":"correction","corrects":"u","amount":"25","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":2`),
	}
	url, _ := settledDatabase(t, recs...)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(good, []byte(strings.Join(recs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Join(recs[:2], "\n")+"\n"+strings.Replace(recs[2], `"25"`, `"26"`, 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	args := func(extra ...string) []string {
		return append([]string{"reconcile", "--tenant", "acme", "--period", "2026-11", "--database-url", url}, extra...)
	}
	if code := run(ctx, args("--source", good), &out, &errOut); code != exitOK || !strings.Contains(out.String(), "agree") {
		t.Fatalf("reconcile --source of what was settled: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "reconcile --source: 3 lines") {
		t.Errorf("no progress line on stderr: %q", errOut.String())
	}
	out.Reset()
	if code := run(ctx, args("--source", bad, "--json"), &out, &errOut); code != exitMismatch {
		t.Fatalf("reconcile --source of a changed export: exit %d, want %d\n%s", code, exitMismatch, errOut.String())
	}
	var rep reconcile.SourceReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Counts[reconcile.ClassSourceDifferent] != 1 || rep.Counts[reconcile.ClassSourceNetDiffers] != 1 || len(rep.Counts) != 2 {
		t.Errorf("report counts %v, want one different and one net charge difference", rep.Counts)
	}
	if code := run(ctx, args("--source", good, "--to", "2026-10"), &out, &errOut); code != exitUsage {
		t.Errorf("--to before --period: exit %d, want %d", code, exitUsage)
	}

	out.Reset()
	if code := run(ctx, []string{"statement", "acme", "2026-11", "--json", "--database-url", url}, &out, &errOut); code != exitOK {
		t.Fatalf("statement: exit %d: %s", code, errOut.String())
	}
	var st inspect.Statement
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(st.Accounts) != 1 || st.Accounts[0].ClosingBalance != "75" || st.Accounts[0].Balance != "75" || !st.Accounts[0].Ties {
		t.Errorf("statement %+v, want one account closing at 75", st)
	}
	out.Reset()
	if code := run(ctx, []string{"statement", "acme", "2026-11", "--csv", "--rows", "--database-url", url}, &out, &errOut); code != exitOK {
		t.Fatalf("statement --csv: exit %d: %s", code, errOut.String())
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// header, 2 opening, 3 ledger rows (grant, charge, correction), 2 closing
	if len(rows) != 8 || rows[len(rows)-2][4] != "closing" || rows[len(rows)-2][9] != "75" {
		t.Errorf("statement CSV: %q", rows)
	}
	out.Reset()
	if code := run(ctx, []string{"statement", "acme", "2026-11", "--database-url", url}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "closing") {
		t.Errorf("statement text: exit %d\n%s", code, out.String())
	}
	if code := run(ctx, []string{"statement", "acme", "11-2026", "--database-url", url}, &out, &errOut); code != exitUsage {
		t.Errorf("statement with a bad period: exit %d, want %d", code, exitUsage)
	}
}

// TestReconcileSourceChainsByOperation: a correction whose own record_id
// is another usage's (r-1 usage 100; r-2 usage 200; r-1 correction of r-2
// to 250) settles to a balance of -350, and reconcile --source of exactly
// those three records agrees: its chains resolve their targets by kind, as
// the settling path does (docs/CONTRACT.md, "Targets resolve by kind"),
// never by record_id alone.
func TestReconcileSourceChainsByOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := []string{
		acmeRecord(`"record_id":"r-1","kind":"usage","amount":"100","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
		acmeRecord(`"record_id":"r-2","kind":"usage","amount":"200","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
		acmeRecord(`"record_id":"r-1","kind":"correction","corrects":"r-2","amount":"250","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":2`),
	}
	url, _ := settledDatabase(t, recs...)
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"balance", "acme", "cust-1", "--json", "--database-url", url}, &out, &errOut); code != exitOK {
		t.Fatalf("balance: exit %d: %s", code, errOut.String())
	}
	var accounts []inspect.AccountView
	if err := json.Unmarshal(out.Bytes(), &accounts); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(accounts) != 1 || accounts[0].Balance != "-350" {
		t.Fatalf("balance = %+v, want -350", accounts)
	}
	src := filepath.Join(t.TempDir(), "source.jsonl")
	if err := os.WriteFile(src, []byte(strings.Join(recs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code := run(ctx, []string{"reconcile", "--tenant", "acme", "--period", "2026-11", "--database-url", url, "--source", src, "--json"}, &out, &errOut)
	var rep reconcile.SourceReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d: %v: %s\n%s", code, err, out.String(), errOut.String())
	}
	if code != exitOK || len(rep.Findings) != 0 || len(rep.Totals) != 1 || rep.Totals[0].Source != "350" || rep.Totals[0].Settle != "350" {
		t.Errorf("reconcile --source of exactly what was settled: exit %d, findings %+v, totals %+v; want exit 0, none, 350 on both sides",
			code, rep.Findings, rep.Totals)
	}
}

// TestReadCommandsOutliveIdleTimeout: a read-side command's snapshot that
// waits idle (here reconcile --source while its file stalls) is never
// ended by the settling path's idle_in_transaction_session_timeout, even
// when the URL lowers it to 300 ms; a settling pool opened from the same
// URL still has its transaction ended.
func TestReadCommandsOutliveIdleTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := []string{
		acmeRecord(`"record_id":"u-1","kind":"usage","amount":"3","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
		acmeRecord(`"record_id":"u-2","kind":"usage","amount":"4","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
	}
	url, _ := settledDatabase(t, recs...)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	url += sep + "idle_in_transaction_session_timeout=300"
	const stall = 1500 * time.Millisecond

	settling, err := databaseFlags{DatabaseURL: url, PoolMaxConns: 1}.pool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer settling.Close()
	tx, err := settling.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stall)
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
		t.Errorf("the settling pool's transaction outlived its idle timeout")
	}
	_ = tx.Rollback(ctx)

	fifo := filepath.Join(t.TempDir(), "source.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(recs[0] + "\n")
		time.Sleep(stall) // the check's snapshot is open and idle meanwhile
		_, _ = f.WriteString(recs[1] + "\n")
	}()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"reconcile", "--tenant", "acme", "--period", "2026-11", "--database-url", url, "--source", fifo}, &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "agree") {
		t.Errorf("reconcile --source over a stalling file: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
}

// TestReconcileGroupWithoutOffsets: reconcile against brokers for a
// consumer group with no committed offsets (a mistyped --group) reports
// the offsets check as not checked, naming the group, never as a pass.
func TestReconcileGroupWithoutOffsets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, _ := settledDatabase(t, acmeRecord(`"record_id":"g","kind":"grant","amount":"100","currency":"USD"`))
	k := kafkatest.NewCluster(t, 1)
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"reconcile", "--database-url", url, "--brokers", strings.Join(k.Brokers, ","), "--group", "setle", "--json"}, &out, &errOut)
	var rep reconcile.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d: %v: %s\n%s", code, err, out.String(), errOut.String())
	}
	for _, c := range rep.Checks {
		if c.Name == "kafka_offsets_not_ahead" {
			if !strings.Contains(c.Skipped, `"setle" has no committed offsets`) {
				t.Errorf("the offsets check of a group without offsets: %+v, want not checked, naming the group", c)
			}
			out.Reset()
			if run(ctx, []string{"reconcile", "--database-url", url, "--brokers", strings.Join(k.Brokers, ","), "--group", "setle"}, &out, &errOut); !strings.Contains(out.String(), "not checked: consumer group") {
				t.Errorf("text report:\n%s", out.String())
			}
			return
		}
	}
	t.Errorf("no offsets check in %+v", rep.Checks)
}

// TestReconcileListsOnlyChecksAUserCanRun: settle reconcile of a database
// alone lists the checks a user can run (run, or not checked with why),
// never those only a program can give input to (a model of the input, a
// finished run's end offsets, the HTTP edge's answers).
func TestReconcileListsOnlyChecksAUserCanRun(t *testing.T) {
	t.Parallel()
	url, _ := settledDatabase(t, acmeRecord(`"record_id":"g","kind":"grant","amount":"100","currency":"USD"`))
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"reconcile", "--database-url", url, "--json"}, &out, &errOut); code != exitOK {
		t.Fatalf("reconcile: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	var rep reconcile.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		switch c.Name {
		case "every_record_delivered", "every_record_has_a_result", "accounts_match_model", "identities_match_model",
			"delivery_outcomes_match_model", "keys_answered_as_stored":
			t.Errorf("reconcile lists %s (%s), which no user can run", c.Name, c.Skipped)
		}
	}
	if len(rep.Checks) == 0 {
		t.Error("no checks listed")
	}
}
