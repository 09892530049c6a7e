package kafkahdr

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/record"
)

// TestRoundTrip: headers keep their order, repeated keys, empty and nil
// values through both directions, and none stays none.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-ab-cd-01")}, {Key: "k", Value: nil},
		{Key: "", Value: []byte{}}, {Key: "k", Value: []byte{0, 0xff}}}
	mid := FromKafka(in)
	out := ToKafka(mid)
	if len(mid) != len(in) || len(out) != len(in) {
		t.Fatalf("%d headers became %d, then %d", len(in), len(mid), len(out))
	}
	for i, want := range in {
		for dir, got := range map[string]record.Header{"FromKafka": mid[i], "ToKafka": {Key: out[i].Key, Value: out[i].Value}} {
			if got.Key != want.Key || !bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) {
				t.Errorf("%s[%d] = %q=%q, want %q=%q", dir, i, got.Key, got.Value, want.Key, want.Value)
			}
		}
	}
	if hs := FromKafka(nil); hs == nil || len(hs) != 0 {
		t.Errorf("FromKafka(nil) = %#v, want an empty, non-nil slice", hs)
	}
	if hs := ToKafka([]record.Header{}); hs != nil {
		t.Errorf("ToKafka(none) = %#v, want nil", hs)
	}
}
