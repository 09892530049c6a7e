package relay

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartsFitABatch: partEnd cuts a round so that a part's bytes stay
// within half the batch limit of each topic in it (the smallest one
// counts from where its topic joins), and a record over that goes alone.
//
// Fails against parts capped at 500,006 bytes whatever the topic (parts of
// 11 and 1):
// sed -i 's|limit = min(limit, int(batchMax(rec.Topic))/2)|limit = 500_006|' relay/relay.go && go test -run TestPartsFitABatch ./relay; git checkout relay/relay.go
func TestPartsFitABatch(t *testing.T) {
	batchMax := func(topic string) int32 {
		if topic == "small" {
			return 1000 // parts of at most 500 B
		}
		return 1_000_012
	}
	rec := func(topic string, n int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("k"), Value: make([]byte, n)} // counted as n + 65 B
	}
	recs := []*kgo.Record{
		rec("big", 100), rec("big", 100), rec("big", 100), rec("big", 100), // 660 B: a part, cut where "small" joins
		rec("small", 100), rec("small", 100), rec("small", 100), // 495 B: a part
		rec("small", 2000),                                    // over 500 B: alone
		rec("big", 100), rec("big", 100), rec("big", 300_000), // 300,395 B: a part
		rec("big", 300_000), // 600,460 B with the part before: cut
	}
	var got []int
	for lo := 0; lo < len(recs); {
		hi := partEnd(recs, lo, batchMax)
		if hi <= lo {
			t.Fatalf("partEnd(%d) = %d: no progress", lo, hi)
		}
		got = append(got, hi-lo)
		lo = hi
	}
	if want := []int{4, 3, 1, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("parts of %v records, want %v", got, want)
	}
}
