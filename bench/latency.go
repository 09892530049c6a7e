package bench

import (
	"slices"
	"time"
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
