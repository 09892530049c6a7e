package outlet_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/outlet"
)

// TestRefusedRecordHoldsNothing: one Send of a key's records with a record
// the broker refuses for good among them, all on one partition (one
// batch, which the broker refuses whole). The refused record goes to the
// owner's Refused (twice: its replacement is refused too), its neighbours
// keep their keys and go out, each key's records in the order given, and
// the partition takes the next Send at once: a refused record neither
// stalls its partition nor reorders a key.
//
// Fails against a refusal policy that does not produce a refused batch's
// records alone first (every neighbour replaced by Refused):
// sed -i 's|switch err := s.alone(ctx, f.i); {|switch err := s.aloneSkipped(ctx, f.i); {|; s|^func (s \*Send) alone(|func (s *Send) aloneSkipped(ctx context.Context, i int) error { return \&RefusedError{Reason: "x", Err: errors.New("x")} }\nfunc (s *Send) alone(|' outlet/retry.go && sed -i 's|^\t"fmt"|\t"errors"\n\t"fmt"|' outlet/retry.go && go test -run TestRefusedRecordHoldsNothing ./outlet; git checkout outlet/retry.go
func TestRefusedRecordHoldsNothing(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	k.SetTopicConfig(t, "usage.results", "max.message.bytes", "20000")
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var refusals []string
	out := outlet.New(cl, outlet.Config{
		Retry:          backoff.Policy{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		AttemptTimeout: 5 * time.Second,
		Refused: func(rec *kgo.Record, reason string, _ error) *kgo.Record {
			refusals = append(refusals, reason)
			if rec.Key == nil {
				return nil // refused without its key too: left
			}
			return &kgo.Record{Topic: rec.Topic, Value: rec.Value}
		},
	})
	rec := func(key, value string) *kgo.Record {
		return &kgo.Record{Topic: "usage.results", Key: []byte(key), Value: []byte(value)}
	}
	noise := make([]byte, 30000) // past the limit however it is compressed
	_, _ = rand.Read(noise)
	big := rec("b", "b1"+string(noise))
	recs := []*kgo.Record{rec("a", "a1"), rec("b", "b0"), big, rec("a", "a2"), rec("b", "b2"), rec("c", "c1")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := out.Produce(ctx, recs...)
	if err != nil {
		t.Fatalf("the send with a refused record: %v", err)
	}
	for i := range recs {
		var refused *outlet.RefusedError
		if got := s.Outcome(i); (i == 2) != errors.As(got, &refused) || (i != 2 && got != nil) {
			t.Errorf("record %d: outcome %v", i, got)
		}
	}
	if len(refusals) != 2 || refusals[0] != "message_too_large" {
		t.Errorf("Refused was told %v, want message_too_large twice (the record, then its replacement)", refusals)
	}
	if _, err := out.Produce(ctx, rec("a", "a3"), rec("c", "c2")); err != nil {
		t.Fatalf("the next send on the partition: %v", err)
	}

	ms := k.Read(t, "usage.results", 0, 2*time.Second)
	// Each key's values as the topic holds them, repeats dropped from the
	// front (a repeat goes again after an earlier record: its last
	// occurrence is where it counts).
	last := map[string][]string{}
	for _, m := range ms {
		if m.Key == nil {
			t.Errorf("a record without its key on the topic: %.10s", m.Value)
			continue
		}
		k, v := string(m.Key), string(m.Value[:2])
		for i, seen := range last[k] {
			if seen == v {
				last[k] = append(last[k][:i:i], last[k][i+1:]...)
				break
			}
		}
		last[k] = append(last[k], v)
	}
	want := map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b0", "b2"}, "c": {"c1", "c2"}}
	if fmt.Sprint(last) != fmt.Sprint(want) {
		t.Errorf("each key's records on the topic, by last occurrence: %v, want %v", last, want)
	}
}

// TestProduceEndsWithItsContext: a stopping owner's attempt returns once
// its context ended and the broker stays silent, with the record it could
// not publish left for a retry, even when the broker is gone (its client
// retries such a record without end, and aborting waits for it).
//
// Fails against an attempt that waits for every answer (not returned after
// 30 s):
// sed -i 's|case <-a.ctx.Done():|case <-make(chan struct{}):|' outlet/outlet.go && go test -run TestProduceEnds ./outlet; git checkout outlet/outlet.go
func TestProduceEndsWithItsContext(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ManualFlushing())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := outlet.New(cl, outlet.Config{Attempts: 1})
	first := &kgo.Record{Topic: "settlements", Value: []byte("a")}
	if s, _ := out.Produce(context.Background(), first); s.Outcome(0) != nil {
		t.Fatalf("before the broker went: %v", s.Outcome(0))
	}
	k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rec := &kgo.Record{Topic: "settlements", Value: []byte("b")}
	done := make(chan error, 1)
	go func() {
		s, _ := out.Produce(ctx, rec)
		done <- s.Outcome(0)
	}()
	select {
	case err := <-done:
		if err == nil || outlet.RefusedForGood(err) != "" {
			t.Errorf("the record the broker did not take: %v, want it left for a retry", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("produce has not returned 30 s after its context ended")
	}
}
