package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/pgcluster"
	"github.com/settlehq/settle/settle/schema"
)

// TestCrashLoop (full tier only) settles 100,000 records with duplicates,
// conflicts, corrections, refunds, holds, releases and captures on a
// private PostgreSQL cluster while killing `settle run` with SIGKILL at
// least 200 times spread over every crash point, terminating its database
// backends (pg_terminate_backend) every 10th run and restarting PostgreSQL
// (immediate mode, crash recovery) once, with the invariants checked after
// every kill; then it settles the rest and compares every balance with the
// model.
func TestCrashLoop(t *testing.T) {
	if !full() {
		t.Skip("full tier: SETTLE_FAULTS_FULL=1 (see TESTING.md)")
	}
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{Listen: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Stop() })
	admin, err := pgx.Connect(ctx, cl.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE settle_loop`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, cl.DSN("settle_loop"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	const records, killsMin = 100_000, 200
	r := newRigOn(t, cl.DSN("settle_loop"), 4242, 1)
	r.wl = newWorkload(t, 4242, 400)
	for i := 0; i < records; i += 10_000 {
		r.produce(10_000)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	kills := map[string]int{}
	var total, terminated, restarts, runs, faultExits int
	for total < killsMin {
		runs++
		point := crashpoint.Points[runs%len(crashpoint.Points)]
		s := r.start(fmt.Sprintf("run-%d", runs), fmt.Sprintf("%s@%d", point, 1+rng.IntN(6)))
		if runs%10 == 0 {
			// Terminate the service's backends mid-run.
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			var n int
			err := admin.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = 'settle_loop' AND application_name <> 'faults_checker' AND pid <> pg_backend_pid()) x`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			terminated += n
		}
		if runs == 55 {
			time.Sleep(500 * time.Millisecond)
			if err := cl.Restart(ctx, true); err != nil {
				t.Fatalf("restart PostgreSQL: %v", err)
			}
			restarts++
			admin.Close(ctx)
			if admin, err = pgx.Connect(ctx, cl.DSN("postgres")); err != nil {
				t.Fatal(err)
			}
			r.pool.Reset()
		}
		if !s.WaitExit(60 * time.Second) {
			s.Kill() // the point was not reached (no work on it): not counted
			continue
		}
		at := s.CrashedAt()
		if at == "" && (runs%10 == 0 || runs == 55) {
			// The database fault hit the service where it does not retry
			// (e.g. reading the schema version at start): it exits 1 and
			// its supervisor starts it again. Not a kill; checked all the
			// same.
			faultExits++
			r.check(false)
			continue
		}
		if at == "" {
			t.Fatalf("run %d exited without a crash point:\n%s", runs, tail(s.Log(), 3000))
		}
		kills[at]++
		total++
		if strings.Contains(s.Log(), "panic:") {
			t.Fatalf("run %d panicked:\n%s", runs, tail(s.Log(), 3000))
		}
		r.check(false)
	}
	rep := r.drain()
	t.Logf("FIGURES crash_loop runs=%d exits_on_db_fault=%d", runs, faultExits)
	t.Logf("FIGURES crash_loop records=%d kills=%d kills_by_point=%v backends_terminated=%d pg_restarts=%d deliveries=%d settled=%d double_effects=%d lost=%d offsets_ahead=%d model_mismatch=%d kinds=%v",
		rep.Inputs, total, kills, terminated, restarts, rep.Deliveries, rep.Settled, rep.DoubleEffects, rep.Lost, rep.OffsetsAhead, rep.ModelMismatch, r.wl.Counts())
}
