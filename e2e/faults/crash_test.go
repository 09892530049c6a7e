package faults

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/crashpoint"
)

// TestCrashPoints kills `settle run` with SIGKILL at each named crash point
// (3 kills per point in the quick tier, 100 in the full tier), restarting it
// after every kill with fresh records produced, and checks the invariants
// after every kill; then an unarmed run settles everything and the final
// check compares every balance with the model.
func TestCrashPoints(t *testing.T) {
	kills := 3
	if full() {
		kills = 100
	}
	for i, point := range crashpoint.Points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, uint64(100+i), 1)
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			r.produce(300)
			got, misses := 0, 0
			for got < kills {
				r.produce(100 + rng.IntN(200))
				// Points hit once per poll or relay round see few hits per
				// run (a poll takes up to 400 records): arm them early.
				hitMax := 4
				if point == "after_commit_before_offset_commit" || point == "after_publish_before_mark" {
					hitMax = 2
				}
				s := r.start(fmt.Sprintf("run-%d", got), fmt.Sprintf("%s@%d", point, 1+rng.IntN(hitMax)))
				if !s.WaitExit(45 * time.Second) {
					// The point was not reached in time (no work on it):
					// a kill of our own, not counted.
					s.Kill()
					if misses++; misses > 3+kills/10 {
						t.Fatalf("crash point %s not reached in %d runs; last log:\n%s", point, misses, tail(s.Log(), 3000))
					}
					continue
				}
				if at := s.CrashedAt(); at != point {
					t.Fatalf("run %d exited without dying at %s (died at %q):\n%s", got, point, at, tail(s.Log(), 3000))
				}
				got++
				r.check(false)
			}
			rep := r.drain()
			t.Logf("FIGURES crash_point=%s kills=%d records=%d deliveries=%d settled=%d double_effects=%d lost=%d offsets_ahead=%d model_mismatch=%d",
				point, got, rep.Inputs, rep.Deliveries, rep.Settled, rep.DoubleEffects, rep.Lost, rep.OffsetsAhead, rep.ModelMismatch)
		})
	}
}
