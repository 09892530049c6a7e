package consumer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func pollOf(sizes ...int) []*partitionWork {
	var work []*partitionWork
	for p, n := range sizes {
		w := &partitionWork{topic: "usage", partition: int32(p), next: -1}
		for o := range n {
			w.records = append(w.records, &kgo.Record{Topic: "usage", Partition: int32(p), Offset: int64(100 + o)})
		}
		work = append(work, w)
	}
	return work
}

// TestLaneCount: a small poll settles in few lanes, a large one in a lane
// per partition up to the cap (0: none).
func TestLaneCount(t *testing.T) {
	for _, tc := range []struct {
		sizes    []int
		lanesMax int
		lanes    int
	}{
		{[]int{30, 30, 30, 30, 30, 30}, 0, 1},
		{[]int{1000, 1000, 1000, 1000, 1000, 1000}, 0, 6},
		{[]int{8000, 10, 10}, 0, 3},
		{[]int{900, 300, 200, 100}, 0, 3},
		{[]int{499}, 0, 1},
		{[]int{1, 1}, 0, 1},
		{[]int{1000, 1000, 1000, 1000, 1000, 1000}, 2, 2},
		{[]int{8000, 1000, 1000, 1000, 1000, 1000}, 2, 2},
		{[]int{1000, 1000, 1000}, 1, 1},
	} {
		if got := laneCount(pollOf(tc.sizes...), 1000, tc.lanesMax); got != tc.lanes {
			t.Errorf("laneCount(%v, lanes max %d) = %d, want %d", tc.sizes, tc.lanesMax, got, tc.lanes)
		}
	}
}

// TestPollQueueTake: a batch is the partition with the most records left
// alone when it has a batch's worth, else it and the next ones; a
// partition another lane holds is not taken, and nothing is taken twice.
func TestPollQueueTake(t *testing.T) {
	q := &pollQueue{works: pollOf(2500, 300, 200)}
	parts := func(b *batch) string {
		if b == nil {
			return "nil"
		}
		s := ""
		for _, p := range b.parts {
			s += fmt.Sprintf("p%d:%d+%d ", p.w.partition, p.w.records[0].Offset+int64(p.w.taken-p.n), p.n)
		}
		return s
	}
	first := q.take(1000)
	if got := parts(first); got != "p0:100+1000 " {
		t.Fatalf("first batch %s, want p0:100+1000", got)
	}
	second := q.take(1000)
	if got := parts(second); got != "p1:100+300 p2:100+200 " {
		t.Fatalf("second batch %s, want p1:100+300 p2:100+200 (p0 is held)", got)
	}
	if b := q.take(1000); b != nil {
		t.Fatalf("third batch %s while p0 is held and the rest taken, want nil", parts(b))
	}
	q.settled(first, len(first.recs), nil)
	if got := parts(q.take(1000)); got != "p0:1100+1000 " {
		t.Fatalf("batch after p0's first settled: %s, want p0:1100+1000", got)
	}
}

// TestPollQueueProgress: a partition's offset moves only over batches whose
// results are acknowledged with every batch before them, though lanes
// acknowledge them out of order; a batch that settled a prefix moves it to
// the prefix and stops it, and finish marks what is not done.
func TestPollQueueProgress(t *testing.T) {
	q := &pollQueue{works: pollOf(2500, 10)}
	p0 := q.works[0]
	b1 := q.take(1000)
	q.settled(b1, 1000, nil)
	b2 := q.take(1000)
	q.settled(b2, 1000, nil)
	q.published(b2, nil)
	if p0.next != -1 {
		t.Fatalf("next = %d after the second batch was acknowledged before the first, want -1", p0.next)
	}
	q.published(b1, nil)
	if p0.next != 2100 {
		t.Fatalf("next = %d after both were acknowledged, want 2100", p0.next)
	}
	b3 := q.take(1000) // p0's last 500, then p1's 10
	if len(b3.parts) != 2 {
		t.Fatalf("third batch has %d partitions, want 2", len(b3.parts))
	}
	broken := errors.New("database gone")
	q.settled(b3, 200, broken) // 200 of p0's 500 settled
	q.published(b3, nil)
	if p0.next != 2300 || !errors.Is(p0.err, broken) {
		t.Fatalf("p0 next %d err %v after a prefix of 200 settled, want 2300 and the error", p0.next, p0.err)
	}
	if p1 := q.works[1]; p1.next != -1 || !errors.Is(p1.err, broken) {
		t.Fatalf("p1 next %d err %v, want -1 and the error", p1.next, p1.err)
	}
	if b := q.take(1000); b != nil {
		t.Fatalf("a stopped partition was taken again: %d records", len(b.recs))
	}

	// Results not acknowledged stop the partition where it was.
	q = &pollQueue{works: pollOf(1500)}
	b1 = q.take(1000)
	q.settled(b1, 1000, nil)
	b2 = q.take(1000)
	q.settled(b2, 500, nil)
	q.published(b2, nil)
	q.published(b1, errAbandoned)
	q.finish()
	if w := q.works[0]; w.next != -1 || !errors.Is(w.err, errAbandoned) {
		t.Fatalf("next %d err %v after the first batch's results were refused, want -1 and errAbandoned", w.next, w.err)
	}

	// Lanes that stop between batches leave the rest yielded.
	q = &pollQueue{works: pollOf(1500, 20)}
	b1 = q.take(1000)
	q.settled(b1, 1000, nil)
	q.published(b1, nil)
	q.finish()
	if w := q.works[0]; w.next != 1100 || !errors.Is(w.err, errYielded) {
		t.Fatalf("p0 next %d err %v, want 1100 and errYielded", w.next, w.err)
	}
	if w := q.works[1]; w.next != -1 || !errors.Is(w.err, errYielded) {
		t.Fatalf("p1 next %d err %v, want -1 and errYielded", w.next, w.err)
	}
}

// TestPollQueueLanes: lanes taking batches concurrently, each settling and
// acknowledging after random pauses, settle every record once, each
// partition in order and never in two batches at once; they end with
// every partition done, and share the records evenly where whole
// partitions could not be shared (three among two lanes).
func TestPollQueueLanes(t *testing.T) {
	sizes := []int{6000, 6000, 5950, 30, 20}
	q := &pollQueue{works: pollOf(sizes...)}
	const lanes = 2
	var (
		mu      sync.Mutex
		last    = map[int32]int64{}
		holding = map[int32]*atomic.Int32{}
		perLane [lanes]int
	)
	for p := range sizes {
		holding[int32(p)] = &atomic.Int32{}
		last[int32(p)] = 99
	}
	var wg, acks sync.WaitGroup
	for l := range lanes {
		rng := rand.New(rand.NewPCG(uint64(l), 7))
		wg.Go(func() {
			for {
				b := q.take(1000)
				if b == nil {
					return
				}
				for _, p := range b.parts {
					if holding[p.w.partition].Add(1) != 1 {
						t.Errorf("partition %d in two batches at once", p.w.partition)
					}
				}
				mu.Lock()
				for _, r := range b.recs {
					if r.Offset != last[r.Partition]+1 {
						t.Errorf("partition %d: offset %d settled after %d", r.Partition, r.Offset, last[r.Partition])
					}
					last[r.Partition] = r.Offset
				}
				perLane[l] += len(b.recs)
				mu.Unlock()
				time.Sleep(time.Duration(len(b.recs)) * time.Microsecond * time.Duration(1+rng.IntN(3)))
				for _, p := range b.parts {
					holding[p.w.partition].Add(-1)
				}
				q.settled(b, len(b.recs), nil)
				pause := time.Duration(rng.IntN(3)) * time.Millisecond
				acks.Go(func() {
					time.Sleep(pause)
					q.published(b, nil)
				})
			}
		})
	}
	wg.Wait()
	acks.Wait()
	q.finish()
	total := 0
	for p, w := range q.works {
		total += sizes[p]
		if w.err != nil || w.next != int64(100+sizes[p]) {
			t.Errorf("partition %d ended at %d with %v, want %d and no error", p, w.next, w.err, 100+sizes[p])
		}
	}
	for l, n := range perLane {
		// Each lane settles about half: the lanes share partitions batch
		// by batch. Whole partitions would give one lane 6,000 and the
		// other 12,000.
		if n < total/lanes-2000 || n > total/lanes+2000 {
			t.Errorf("lane %d settled %d of %d records (per lane %v): not shared", l, n, total, perLane)
		}
	}
}
