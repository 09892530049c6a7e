package consumer

import (
	"errors"
	"fmt"
	"slices"
	"testing"

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

// TestLanes: a small poll settles in few lanes, a large one in a lane per
// partition up to the cap (0: none); every record is in exactly one lane, each
// partition whole in one lane and in order, the lanes balanced by records.
// Seen failing with the cap ignored.
func TestLanes(t *testing.T) {
	for _, tc := range []struct {
		sizes    []int
		lanesMax int
		lanes    []int // records per lane
	}{
		{[]int{30, 30, 30, 30, 30, 30}, 0, []int{180}},
		{[]int{1000, 1000, 1000, 1000, 1000, 1000}, 0, []int{1000, 1000, 1000, 1000, 1000, 1000}},
		{[]int{8000, 10, 10}, 0, []int{8000, 10, 10}},
		{[]int{900, 300, 200, 100}, 0, []int{900, 300, 300}},
		{[]int{499}, 0, []int{499}},
		{[]int{1, 1}, 0, []int{2}},
		{[]int{1000, 1000, 1000, 1000, 1000, 1000}, 2, []int{3000, 3000}},
		{[]int{8000, 1000, 1000, 1000, 1000, 1000}, 2, []int{8000, 5000}},
		{[]int{1000, 1000, 1000}, 1, []int{3000}},
	} {
		t.Run(fmt.Sprint(tc.sizes, tc.lanesMax), func(t *testing.T) {
			work := pollOf(tc.sizes...)
			ls := lanes(work, 1000, tc.lanesMax)
			var got []int
			seen := map[*kgo.Record]bool{}
			laneOf := map[int32]*lane{}
			for _, l := range ls {
				got = append(got, len(l.recs))
				for i, r := range l.recs {
					if seen[r] {
						t.Errorf("record %d/%d in two lanes", r.Partition, r.Offset)
					}
					seen[r] = true
					if o, ok := laneOf[r.Partition]; ok && o != l {
						t.Errorf("partition %d split across lanes", r.Partition)
					}
					laneOf[r.Partition] = l
					if !slices.ContainsFunc(l.works, func(w *partitionWork) bool { return w.partition == r.Partition }) {
						t.Errorf("record %d/%d in a lane without its partition", r.Partition, r.Offset)
					}
					if i > 0 && l.recs[i-1].Partition == r.Partition && l.recs[i-1].Offset+1 != r.Offset {
						t.Errorf("partition %d out of order in its lane: %d then %d", r.Partition, l.recs[i-1].Offset, r.Offset)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.lanes) {
				t.Errorf("records per lane = %v, want %v", got, tc.lanes)
			}
			total := 0
			for _, n := range tc.sizes {
				total += n
			}
			if len(seen) != total {
				t.Errorf("%d records in lanes, want %d", len(seen), total)
			}
		})
	}
}

// TestLaneProgress: a batch moves each partition it holds to the offset
// after its last record there, and a lane that stops marks only the
// partitions it did not finish.
func TestLaneProgress(t *testing.T) {
	l := lanes(pollOf(3, 2, 4), 1000, 0)[0]
	// The first batch ends inside the second partition of the lane.
	first := l.progressOver(l.recs[:5])
	if len(first) != 2 || first[0].w != l.works[0] || first[0].next != 104 || first[1].w != l.works[1] || first[1].next != 101 {
		t.Fatalf("progress of the first batch = %+v", first)
	}
	for _, p := range first {
		p.w.next = p.next
	}
	l.stop(errYielded)
	if l.works[0].err != nil {
		t.Errorf("finished partition %d got %v", l.works[0].partition, l.works[0].err)
	}
	for _, w := range l.works[1:] {
		if !errors.Is(w.err, errYielded) {
			t.Errorf("unfinished partition %d got %v, want errYielded", w.partition, w.err)
		}
	}
}
