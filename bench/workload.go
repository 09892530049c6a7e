package bench

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"
)

// Mix is the share of each kind of record in a workload; what is left after
// the named shares is plain usage (and one grant per subject, which funds
// its holds).
type Mix struct {
	Duplicates  float64 // exact repeats of a recent record
	Conflicts   float64 // a recent usage again with another amount: quarantined
	Corrections float64 // a new total for a recent chain
	Refunds     float64 // a refund of a recent chain
	Holds       float64 // a reservation against the subject's credits
}

// Workload describes the records a run generates.
type Workload struct {
	Records    int    // input records, repeats included
	Tenants    int    // tenants the subjects are spread over
	Subjects   int    // accounts (tenant, subject, currency)
	Partitions int    // usage topic partitions
	Period     string // account period of every record
	Seed       uint64
	Mix        Mix
}

// Gen is one generated input record.
type Gen struct {
	Key       []byte
	Value     []byte
	Partition int32
	// New is true for the first record of an identity (not a duplicate nor
	// a conflicting repeat).
	New bool
	// ID is the identity's key as the checks and the latency reader name
	// it: tenant/period/record_id/operation.
	ID string
}

type chainRef struct {
	tenant, subject, root string
	version               int
	refunded              bool
	cents                 int64
}

// generator produces a workload's records one at a time, deterministically
// for a seed. Dependent records (a correction, a refund) always share their
// target's key, so they land on its partition after it.
type generator struct {
	w        Workload
	rng      *rand.Rand
	n        int
	funded   []bool
	recent   []Gen      // ring of recent new records, for duplicates
	chains   []chainRef // ring of recent chains, for corrections, refunds, conflicts
	recentAt int
	chainAt  int
	occurred string
	buf      []byte
}

const ringSize = 8192

func newGenerator(w Workload) *generator {
	return &generator{w: w, rng: rand.New(rand.NewPCG(w.Seed, w.Seed^0x5e771e)), funded: make([]bool, w.Subjects),
		occurred: time.Date(2026, 7, 14, 12, 0, 0, 0, time.UTC).Format(time.RFC3339)}
}

func (g *generator) subject(i int) (tenant, subject string) {
	return "t-" + strconv.Itoa(i%g.w.Tenants), "s-" + strconv.Itoa(i)
}

// partition is where a key lands: the bench produces to explicit partitions
// so that the end-to-end and core-only runs see the same order.
func (g *generator) partition(key []byte) int32 {
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(g.w.Partitions))
}

// next returns the next record. Generated values are fresh slices: callers
// may keep them.
func (g *generator) next() Gen {
	g.n++
	m := g.w.Mix
	u := g.rng.Float64()
	switch {
	case u < m.Duplicates && len(g.recent) > 0:
		r := g.recent[g.rng.IntN(len(g.recent))]
		r.New = false
		return r
	case u < m.Duplicates+m.Conflicts && len(g.chains) > 0:
		c := g.chains[g.rng.IntN(len(g.chains))]
		// The root usage again, with an amount it never had: same
		// identity, other fingerprint.
		return g.emit(false, c.tenant, c.subject, c.root, "usage", func(b []byte) []byte {
			b = appendAmount(b, 1_000_000_007+int64(g.n))
			return append(b, `,"meter":"gpu_seconds","quantity":"1","unit":"s","finalization_version":1`...)
		})
	}
	u -= m.Duplicates + m.Conflicts
	sIdx := g.rng.IntN(g.w.Subjects)
	tenant, subject := g.subject(sIdx)
	if !g.funded[sIdx] {
		// Each subject's first record is a grant that funds its holds.
		g.funded[sIdx] = true
		r := g.emit(true, tenant, subject, "g-"+subject, "grant", func(b []byte) []byte {
			return append(b, `,"amount":"1000000000","currency":"USD"`...)
		})
		g.remember(r)
		return r
	}
	switch {
	case u < m.Corrections && len(g.chains) > 0:
		i := g.rng.IntN(len(g.chains))
		c := &g.chains[i]
		c.version++
		c.cents += int64(g.rng.IntN(500)) - 100
		if c.cents < 0 {
			c.cents = 0
		}
		cents, version, root := c.cents, c.version, c.root
		r := g.emit(true, c.tenant, c.subject, "c-"+strconv.Itoa(g.n), "correction", func(b []byte) []byte {
			b = appendAmount(b, cents)
			b = append(b, `,"meter":"gpu_seconds","quantity":"1","unit":"s","finalization_version":`...)
			b = strconv.AppendInt(b, int64(version), 10)
			return append(append(append(b, `,"corrects":"`...), root...), '"')
		})
		g.remember(r)
		return r
	case u < m.Corrections+m.Refunds && len(g.chains) > 0:
		c := &g.chains[g.rng.IntN(len(g.chains))]
		if !c.refunded {
			c.refunded = true
			r := g.emit(true, c.tenant, c.subject, c.root, "refund", nil)
			g.remember(r)
			return r
		}
	case u < m.Corrections+m.Refunds+m.Holds:
		r := g.emit(true, tenant, subject, "h-"+strconv.Itoa(g.n), "hold", func(b []byte) []byte {
			return appendAmount(b, int64(100+g.rng.IntN(10_000)))
		})
		g.remember(r)
		return r
	}
	cents := int64(1 + g.rng.IntN(100_000))
	rid := "u-" + strconv.Itoa(g.n)
	r := g.emit(true, tenant, subject, rid, "usage", func(b []byte) []byte {
		b = appendAmount(b, cents)
		b = append(b, `,"meter":"gpu_seconds","quantity":"`...)
		b = strconv.AppendInt(b, cents, 10)
		return append(b, `","unit":"s","finalization_version":1,"source":"bench","attributes":{"region":"eu-west-1"}`...)
	})
	g.remember(r)
	c := chainRef{tenant: tenant, subject: subject, root: rid, version: 1, cents: cents}
	if len(g.chains) < ringSize {
		g.chains = append(g.chains, c)
	} else {
		g.chains[g.chainAt%ringSize] = c
		g.chainAt++
	}
	return r
}

func (g *generator) remember(r Gen) {
	if len(g.recent) < ringSize {
		g.recent = append(g.recent, r)
		return
	}
	g.recent[g.recentAt%ringSize] = r
	g.recentAt++
}

// appendAmount appends `,"amount":"D.DD","currency":"USD"` for cents.
func appendAmount(b []byte, cents int64) []byte {
	b = append(b, `,"amount":"`...)
	b = strconv.AppendInt(b, cents/100, 10)
	b = append(b, '.')
	if c := cents % 100; c < 10 {
		b = append(b, '0')
		b = strconv.AppendInt(b, c, 10)
	} else {
		b = strconv.AppendInt(b, c, 10)
	}
	return append(b, `","currency":"USD"`...)
}

func (g *generator) emit(isNew bool, tenant, subject, recordID, kind string, rest func([]byte) []byte) Gen {
	b := g.buf[:0]
	b = append(b, `{"tenant_id":"`...)
	b = append(b, tenant...)
	b = append(b, `","account_period":"`...)
	b = append(b, g.w.Period...)
	b = append(b, `","record_id":"`...)
	b = append(b, recordID...)
	b = append(b, `","kind":"`...)
	b = append(b, kind...)
	b = append(b, `","subject":"`...)
	b = append(b, subject...)
	b = append(b, `","occurred_at":"`...)
	b = append(b, g.occurred...)
	b = append(b, '"')
	if rest != nil {
		b = rest(b)
	}
	b = append(b, '}')
	g.buf = b
	key := []byte(tenant + "/" + subject)
	return Gen{Key: key, Value: append([]byte(nil), b...), Partition: g.partition(key), New: isNew,
		ID: tenant + "/" + g.w.Period + "/" + recordID + "/" + kind}
}
