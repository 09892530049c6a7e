package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/settlehq/settle/settle/inspect"
)

// Latency summarises end-to-end latencies: input record timestamp to the
// settlement consumed from the settlements topic.
type Latency struct {
	Samples int     `json:"samples"`
	P50ms   float64 `json:"p50_ms"`
	P90ms   float64 `json:"p90_ms"`
	P99ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	RateRPS float64 `json:"offered_records_per_sec"`
	// Histogram: counts per bucket of BucketMs milliseconds, for the plot.
	BucketMs  float64 `json:"bucket_ms"`
	Histogram []int   `json:"histogram"`
	// Stages split the latency of settled records (see latencyStages).
	Stages []LatencyStage `json:"stages,omitempty"`
	// The first WarmupSeconds of the run (an empty database, a cold
	// account cache, the group's first fetches) are left out of the
	// figures above; their own p99 is here.
	WarmupSeconds float64 `json:"warmup_s"`
	WarmupSamples int     `json:"warmup_samples"`
	WarmupP99ms   float64 `json:"warmup_p99_ms"`
}

func summarise(ds []time.Duration, rate float64) *Latency {
	if len(ds) == 0 {
		return &Latency{RateRPS: rate}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / 1e6
	}
	l := &Latency{Samples: len(ds), P50ms: q(0.50), P90ms: q(0.90), P99ms: q(0.99), MaxMs: float64(ds[len(ds)-1]) / 1e6, RateRPS: rate}
	l.BucketMs = 5
	top := min(l.MaxMs, 4*l.P99ms+10)
	l.Histogram = make([]int, int(top/l.BucketMs)+1)
	for _, d := range ds {
		i := int(float64(d) / 1e6 / l.BucketMs)
		if i >= len(l.Histogram) {
			i = len(l.Histogram) - 1
		}
		l.Histogram[i]++
	}
	return l
}

// LatencyStage is how long settled records took, from their input record's
// timestamp, to reach one point of the pipeline.
type LatencyStage struct {
	Stage string  `json:"stage"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// latencyStages splits a paced run's latency at the points the identities
// record: when the service decoded the record (first_seen_at) and when the
// transaction that settled it began (last_attempted_at). What is left to
// the total is the transaction, its commit, the relay and the topic.
func latencyStages(ctx context.Context, read *inspect.Store, sentAt func(identity string) (time.Time, bool)) ([]LatencyStage, error) {
	times, err := read.SettledTimes(ctx)
	if err != nil {
		return nil, fmt.Errorf("latency stages: %w", err)
	}
	var decoded, began []time.Duration
	for _, st := range times {
		if t, ok := sentAt(st.Identity); ok {
			decoded = append(decoded, st.FirstSeen.Sub(t))
			began = append(began, st.TxBegan.Sub(t))
		}
	}
	var out []LatencyStage
	for _, s := range []struct {
		name string
		ds   []time.Duration
	}{{"decoded by the consumer", decoded}, {"settling transaction began", began}} {
		if l := summarise(s.ds, 0); l.Samples > 0 {
			out = append(out, LatencyStage{Stage: s.name, P50ms: l.P50ms, P99ms: l.P99ms})
		}
	}
	return out, nil
}
