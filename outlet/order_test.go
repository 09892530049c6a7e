package outlet

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyOrderRepeatsOrHoldsBack: a record produced again (or just alone)
// sends every later record of its topic and key the broker took again after
// it, and on the last attempt holds them back (ErrHeldBack) instead; other
// keys, other topics and earlier records are left alone, and a record
// refused and left holds back nothing.
//
// Fails when a record taken alone is not counted as produced after the
// later records of its key (the repeat of a2, c2 missing):
// sed -i 's/state != posAgain \&\& state != posResent/state != posAgain/' outlet/retry.go && go test -run TestKeyOrder ./outlet; git checkout outlet/retry.go
func TestKeyOrderRepeatsOrHoldsBack(t *testing.T) {
	rec := func(topic, key string) *kgo.Record { return &kgo.Record{Topic: topic, Key: []byte(key)} }
	recs := []*kgo.Record{rec("t", "a"), rec("t", "b"), rec("t", "a"), rec("u", "a"), rec("t", "c"), rec("t", "c"),
		rec("t", "d"), rec("t", "d"), rec("t", "a")}
	st := []uint8{posTaken, posAgain, posTaken, posTaken, posResent, posTaken, posLeft, posTaken, posAgain}
	for _, tc := range []struct {
		last      bool
		wantAgain []int
		wantHeld  []int
	}{
		// b (1) goes again, a at 2 is before the a at 8 that does; the c at
		// 5 was taken before the c at 4 went alone: it goes again; u/a and
		// the d behind a refused d stay.
		{false, []int{1, 5, 8}, nil},
		{true, []int{1, 8}, []int{5}},
	} {
		s := &Send{recs: recs, out: make([]error, len(recs))}
		again := s.keepKeyOrder(slices.Clone(st), []int{1, 8}, tc.last)
		if !slices.Equal(again, tc.wantAgain) {
			t.Errorf("last=%v: again %v, want %v", tc.last, again, tc.wantAgain)
		}
		var held []int
		for i, err := range s.out {
			if errors.Is(err, ErrHeldBack) {
				held = append(held, i)
			}
		}
		if !slices.Equal(held, tc.wantHeld) {
			t.Errorf("last=%v: held back %v, want %v", tc.last, held, tc.wantHeld)
		}
	}
}
