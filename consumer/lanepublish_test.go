package consumer_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestLaneStopsWhenResultsCannotBePublished: a small poll of two
// partitions is settled in one lane and one transaction, and the broker
// refuses its results. The lane waits, the consumer is stopped while it
// waits, and neither partition's offset is committed to Kafka (the results
// were never acknowledged), though PostgreSQL holds both. The next member
// reads both partitions again, publishes every record's stored result and
// commits both.
func TestLaneStopsWhenResultsCannotBePublished(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	s := settletest.NewStore(t, settle.Config{})
	const group = "lane-publish"
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 3 {
			recs = append(recs, rec(p, usage("record_id", fmt.Sprintf("u-%d-%d", p, i))))
		}
	}
	k.Produce(t, recs...)

	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	k.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		// The input records are all produced before: while refusing,
		// every produce is the consumer's results.
		r := req.(*kmsg.ProduceRequest)
		if !refuse.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code // not retried by the client
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	_, stop := runConsumer(t, s, consumerConfig(t, k, group))
	testnet.WaitFor(t, "both partitions settled in PostgreSQL and their results refused", 20*time.Second, func() bool {
		_, pg := checkOffsets(t, k, s, group)
		return pg[0] == 3 && pg[1] == 3 && refused.Load() >= 2
	})
	var txs int
	if err := s.Pool().QueryRow(t.Context(), `SELECT count(DISTINCT committed_at) FROM identities`).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Fatalf("the two partitions were settled in %d transactions, want 1 (one lane): the test needs a lane of two partitions", txs)
	}
	stop()
	if kafka, _ := checkOffsets(t, k, s, group); kafka[0] != 0 || kafka[1] != 0 {
		t.Fatalf("kafka committed %v after a stop while the lane's results were refused, want nothing: the results were never published", kafka)
	}

	refuse.Store(false)
	_, stop = runConsumer(t, s, consumerConfig(t, k, group))
	testnet.WaitFor(t, "both partitions committed", 20*time.Second, func() bool {
		kafka, _ := checkOffsets(t, k, s, group)
		return kafka[0] == 3 && kafka[1] == 3
	})
	stop()
	rs := results(t, k, 6)
	for key, r := range rs {
		if r.Outcome != message.OutcomeSettled {
			t.Errorf("result of %s: %s, want settled (the stored answer)", key, r.Outcome)
		}
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM ledger_entries`); n != 6 {
		t.Errorf("ledger rows = %d, want 6", n)
	}
}
