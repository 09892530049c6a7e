package workload

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
)

// benchMix is settle-bench's default mix.
var benchMix = Mix{Duplicates: 0.30, Conflicts: 0.01, Corrections: 0.05, Refunds: 0.05, Holds: 0.05}

func mustNew(t testing.TB, cfg Config) *Workload {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestBenchStreamUnchanged pins the records settle-bench generates: the
// hashes are those of the generator the benchmark had before it used this
// package, so figures measured before and after compare like for like. A
// change to the stream of a benchmark mix (any share below at zero, Source
// "bench") must be deliberate: it changes what every bench figure measures.
func TestBenchStreamUnchanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		records int
		cfg     Config
		sum     string
		news    int
	}{
		{200_000, Config{Tenants: 10, Subjects: 10_000, Partitions: 6, Seed: 1, Mix: benchMix},
			"5cc600346bede690e813ff4cda20deef192aad712adf299cb00af749d97ddcc0", 138266},
		{50_000, Config{Tenants: 3, Subjects: 200, Partitions: 3, Seed: 11, Mix: benchMix},
			"b5eb4173f9b681361856b76fa56e75e54cb8fc1667d1cd9e47ec65100dfa7675", 34316},
		{50_000, Config{Tenants: 1, Subjects: 1, Partitions: 2, Seed: 3,
			Mix: Mix{Duplicates: 0.1, Conflicts: 0.1, Corrections: 0.2, Refunds: 0.1, Holds: 0.3}},
			"bf66056f38ef30e8e0a6cc9f532ab4fae8e4ec7c74f21066a8d40212b3bce301", 40021},
	} {
		tc.cfg.Source = "bench"
		w := mustNew(t, tc.cfg)
		h := sha256.New()
		news := 0
		for range tc.records {
			r := w.Next()
			fmt.Fprintf(h, "%d|%s|%s|%v|%s\n", r.Partition, r.Key, r.Value, r.New(), r.Identity)
			if r.New() {
				news++
			}
		}
		if got := fmt.Sprintf("%x", h.Sum(nil)); got != tc.sum || news != tc.news {
			t.Errorf("%+v: stream %s with %d new identities, want %s with %d", tc.cfg, got, news, tc.sum, tc.news)
		}
		if got := w.Model().ExpectedIdentities(); got != int64(news) {
			t.Errorf("%+v: model expects %d identities, the records say %d", tc.cfg, got, news)
		}
	}
}

// TestGeneratorDeterministic: one seed, one workload; a repeat follows
// its original, and every record that names a target (a conflict, a
// correction, a refund, a capture, a release) follows it on its partition;
// offsets count each partition's records; the mix gives about its shares.
func TestGeneratorDeterministic(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Tenants: 2, Subjects: 50, Partitions: 4, Seed: 7, Mix: Mix{Duplicates: 0.3, Conflicts: 0.01,
			Corrections: 0.05, Refunds: 0.05, Holds: 0.05, Releases: 0.03, Captures: 0.03, Grants: 0.02, Poison: 0.01,
			Reprovenanced: 0.5}},
		{Tenants: 2, Subjects: 50, Partitions: 4, Seed: 8, Mix: Mix{Duplicates: 0.3, Conflicts: 0.01,
			Corrections: 0.05, Refunds: 0.05, Grants: 0.02, Reprovenanced: 0.5, CrossPartition: 0.5}},
	} {
		const records = 4000
		a, b := mustNew(t, cfg), mustNew(t, cfg)
		news := 0
		seen := map[string]bool{}    // identities sent
		partOf := map[string]int32{} // identity -> partition of its first record keyed by its account
		offsets := map[int32]int64{}
		for range records {
			x, y := a.Next(), b.Next()
			if string(x.Value) != string(y.Value) || x.Partition != y.Partition || x.Expect != y.Expect {
				t.Fatalf("same seed, different records: %s vs %s", x.Value, y.Value)
			}
			if x.Offset != offsets[x.Partition] {
				t.Fatalf("record %s at offset %d of partition %d, want %d", x.Value, x.Offset, x.Partition, offsets[x.Partition])
			}
			offsets[x.Partition]++
			f := fieldsOf(t, &x)
			home := x.Identity.Tenant + "/" + f.Subject
			if x.What == WhatRetry {
				home += "/retry"
			}
			if x.What != WhatPoison && string(x.Key) != home {
				t.Fatalf("record %s keyed %s", x.Value, x.Key)
			}
			id := x.Identity.String()
			if (x.What == WhatDuplicate || x.What == WhatRetry) && !x.New() && !seen[id] {
				t.Fatalf("%s %s before its original", x.What, x.Value)
			}
			var target string
			switch {
			case x.What == WhatConflict:
				target = id
			case f.Corrects != "" || x.What == WhatRefund:
				target = Identity{x.Identity.Tenant, x.Identity.Period, cmp.Or(f.Corrects, f.RecordID), "usage"}.String()
			case f.HoldID != "" || x.What == WhatHoldRelease:
				target = Identity{x.Identity.Tenant, x.Identity.Period, cmp.Or(f.HoldID, f.RecordID), "hold"}.String()
			}
			if p, ok := partOf[target]; target != "" && (!ok || p != x.Partition) {
				t.Fatalf("%s %s on partition %d before its target %s (on %d, seen %v)", x.What, x.Value, x.Partition, target, p, ok)
			}
			if x.New() {
				news++
			}
			if x.New() || x.What == WhatDuplicate {
				seen[id] = true
				if _, ok := partOf[id]; !ok && x.What != WhatRetry {
					partOf[id] = x.Partition
				}
			}
		}
		if news < records/2 || news > records*4/5 {
			t.Fatalf("%d new identities of %d records: the mix is off", news, records)
		}
		t.Logf("%+v: %v", cfg.Mix, a.Counts())
		for _, what := range []string{WhatGrant, WhatUsage, WhatCorrection, WhatRefund, WhatDuplicate, WhatConflict} {
			if a.Counts()[what] == 0 {
				t.Errorf("no %s record in %d", what, records)
			}
		}
		m := cfg.Mix
		for what, share := range map[string]float64{WhatCapture: m.Captures, WhatHold: m.Holds, WhatHoldRelease: m.Releases,
			WhatPoison: m.Poison, WhatRetry: m.CrossPartition} {
			if share > 0 && a.Counts()[what] == 0 {
				t.Errorf("no %s record in %d", what, records)
			}
		}
	}
}

type fields struct {
	RecordID string `json:"record_id"`
	Subject  string `json:"subject"`
	Corrects string `json:"corrects"`
	HoldID   string `json:"hold_id"`
}

// fieldsOf decodes what a record names (nothing for poison).
func fieldsOf(t *testing.T, r *Record) fields {
	t.Helper()
	var f fields
	if r.What == WhatPoison {
		return f
	}
	if err := json.Unmarshal(r.Value, &f); err != nil {
		t.Fatalf("record %s: %v", r.Value, err)
	}
	return f
}

// TestConfigValidate: what cannot work is refused, with the reason.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{Tenants: 3, Subjects: 2}, false},
		{Config{Period: "2026-13"}, false},
		{Config{Mix: Mix{Duplicates: 0.6, Conflicts: 0.4}}, false},
		{Config{Mix: Mix{Corrections: 0.5, Holds: 0.5}}, false},
		{Config{Mix: Mix{Duplicates: -0.1}}, false},
		{Config{Partitions: 1, Mix: Mix{Duplicates: 0.3, CrossPartition: 0.3}}, false},
		{Config{Partitions: 2, Mix: Mix{Duplicates: 0.3, CrossPartition: 0.3, Holds: 0.1}}, false},
		{Config{Partitions: 2, Mix: Mix{Duplicates: 0.3, CrossPartition: 0.3, Refunds: 0.1}}, true},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok %v", tc.cfg, err, tc.ok)
		}
	}
}
