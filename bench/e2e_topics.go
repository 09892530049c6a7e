package bench

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkaread"
	"github.com/settlehq/settle/settle/message"
)

// settlementMsg is the part of a settlements message the bench reads.
type settlementMsg struct {
	SettlementID string               `json:"settlement_id"`
	Identity     message.IdentityJSON `json:"identity"`
}

// latencyReader consumes the settlements topic while a paced run goes on and
// records, per settlement, the time from its input record's timestamp to
// its arrival here.
type latencyReader struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	lat     []time.Duration
	n       atomic.Int64
	unknown atomic.Int64
	once    sync.Once
	sentAt  func(identity string) (time.Time, bool)
	// from: records sent before it (Unix ns) are the warm-up's; until
	// it is set, every record is.
	from atomic.Int64
	warm []time.Duration
}

func startLatencyReader(ctx context.Context, brokers []string, topic string, sentAt func(string) (time.Time, bool)) *latencyReader {
	ctx, cancel := context.WithCancel(ctx)
	l := &latencyReader{cancel: cancel, done: make(chan struct{}), sentAt: sentAt}
	go func() {
		defer close(l.done)
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond))
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				var m settlementMsg
				if json.Unmarshal(r.Value, &m) != nil {
					l.unknown.Add(1)
					return
				}
				id := m.Identity
				t, ok := sentAt(id.TenantID + "/" + id.AccountPeriod + "/" + id.RecordID + "/" + id.Operation)
				if !ok {
					l.unknown.Add(1)
					return
				}
				l.mu.Lock()
				if f := l.from.Load(); f == 0 || t.UnixNano() < f {
					l.warm = append(l.warm, now.Sub(t))
				} else {
					l.lat = append(l.lat, now.Sub(t))
				}
				l.mu.Unlock()
				l.n.Add(1)
			})
		}
	}()
	return l
}

func (l *latencyReader) count() int64 { return l.n.Load() + l.unknown.Load() }
func (l *latencyReader) stop()        { l.once.Do(func() { l.cancel(); <-l.done }) }

// samples returns the latencies of the records sent after the warm-up and
// of those sent during it.
func (l *latencyReader) samples() (steady, warm []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lat), slices.Clone(l.warm)
}

// steadySentAt is sentAt for the records sent after the warm-up.
func (l *latencyReader) steadySentAt(id string) (time.Time, bool) {
	t, ok := l.sentAt(id)
	from := l.from.Load()
	return t, ok && from != 0 && t.UnixNano() >= from
}

// readTopics reads the settlements and results topics to their ends
// (kafkaread.ToEnd; check runs once the outbox is empty and every record's
// offset is committed, after its result) and counts distinct settlement ids
// and distinct input coordinates with a result.
func readTopics(ctx context.Context, brokers []string, tp topics) (TopicCheck, error) {
	var tc TopicCheck
	ids := map[string]struct{}{}
	_, err := kafkaread.ToEnd(ctx, brokers, nil, tp.settlements, func(r *kgo.Record) {
		tc.SettlementMessages++
		var m settlementMsg
		if json.Unmarshal(r.Value, &m) == nil {
			ids[m.SettlementID] = struct{}{}
		}
	})
	if err != nil {
		return tc, err
	}
	coords := map[[2]int64]struct{}{}
	_, err = kafkaread.ToEnd(ctx, brokers, nil, tp.results, func(r *kgo.Record) {
		var res struct {
			Source message.Coordinates `json:"source"`
		}
		if json.Unmarshal(r.Value, &res) == nil {
			coords[[2]int64{int64(res.Source.Partition), res.Source.Offset}] = struct{}{}
		}
	})
	if err != nil {
		return tc, err
	}
	tc.DistinctSettlementIDs, tc.ResultCoordinates = int64(len(ids)), int64(len(coords))
	return tc, nil
}
