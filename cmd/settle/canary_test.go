package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/settletest"
)

// TestCanaryCommand: `settle canary` against `settle run` on a loopback
// broker prints every scenario ok with its seconds and that the crash
// before the acknowledgement is the fault tier's, and exits 0; given the
// database, it rejects the conflict case its run opened through the
// analysts' resolve path, recorded as the canary (seen failing: the
// standalone command left it open); `settle run --canary-every` below 10 s
// is refused with exit 2.
func TestCanaryCommand(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	db := settletest.NewDatabase(t)
	admin := testnet.FreeAddr(t)
	var svc testnet.SyncBuffer
	stop := testnet.Background(t, func(ctx context.Context) error {
		if code := run(ctx, []string{"run", "--database-url", db, "--brokers", k.Brokers[0], "--admin-addr", admin, "--session-timeout", "1s"}, &svc, &svc); code != exitOK {
			return fmt.Errorf("exit %d:\n%s", code, svc.String())
		}
		return nil
	})
	defer stop()
	testnet.WaitFor(t, "/readyz 200", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/readyz"); return c == 200 })

	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"canary", "--brokers", k.Brokers[0], "--deadline", "30s", "--retry-delay", "500ms", "--database-url", db}, &out, &errs); code != exitOK {
		t.Fatalf("canary: exit %d\n%s%s", code, out.String(), errs.String())
	}
	for _, s := range []string{"duplicate_same_partition  ok", "copy_other_partition      ok", "retry_after_delay         ok",
		"conflicting_payload       ok", "correction                ok", "refund                    ok", "crash_before_ack          not run", "fault tier"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output does not say %q:\n%s", s, out.String())
		}
	}

	pool := settletest.PoolOn(t, db, 2)
	if open := settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases WHERE tenant_id = 'settle-canary' AND status = 'open'`); open != 0 {
		t.Errorf("%d canary conflict cases left open by settle canary --database-url", open)
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM case_resolutions WHERE tenant_id = 'settle-canary' AND decision = 'reject'
		AND resolved_by LIKE '%settle-canary%' AND reason = 'canary: a conflict sent on purpose'`); n != 1 {
		t.Errorf("%d canary cases rejected as the canary, want 1", n)
	}
	if !regexp.MustCompile(`conflict case \d+ rejected`).MatchString(out.String()) {
		t.Errorf("output does not say the conflict case was rejected:\n%s", out.String())
	}

	out.Reset()
	if code := run(context.Background(), []string{"run", "--database-url", db, "--brokers", k.Brokers[0], "--admin-addr", testnet.FreeAddr(t), "--canary-every", "5s"}, &out, &out); code != exitUsage {
		t.Errorf("run --canary-every 5s: exit %d, want 2\n%s", code, out.String())
	} else if !strings.Contains(out.String(), "at least 10s") {
		t.Errorf("run --canary-every 5s: %s, want the minimum named", out.String())
	}
}
