package workload

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestModelMatchesSettle settles generated workloads in stream order
// through settle.Store against real PostgreSQL and compares, record by
// record, the outcome and reason settle gave with the one the model
// expects; identity by identity, the ledger rows of each settlement with
// the model's effect; and account by account, balance and held. One
// workload has every kind (with a small funding grant, so holds are refused
// for lack of funds, and poison), the other cross-partition retries before
// and after their originals. This is what makes the model fit to judge
// bench, faults and e2e: a model that drifts from settle fails here first.
func TestModelMatchesSettle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		records int
		cfg     Config
	}{
		{"every_kind", 3000, Config{Tenants: 2, Subjects: 12, Partitions: 3, Seed: 21, Funding: 30_000_00, Source: "test",
			Mix: Mix{Duplicates: 0.15, Conflicts: 0.03, Corrections: 0.12, Refunds: 0.08, Holds: 0.15, Releases: 0.05,
				Captures: 0.05, Grants: 0.05, Poison: 0.02, Reprovenanced: 0.5}}},
		{"cross_partition", 3000, Config{Tenants: 3, Subjects: 40, Partitions: 4, Seed: 22,
			Mix: Mix{Duplicates: 0.30, Conflicts: 0.02, Corrections: 0.05, Refunds: 0.05, Grants: 0.1,
				Reprovenanced: 0.5, CrossPartition: 0.6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.TrackEffects = true
			w := mustNew(t, tc.cfg)
			recs := w.Take(tc.records)
			checkAgainstSettle(t, w, recs)
		})
	}
}

func checkAgainstSettle(t *testing.T, w *Workload, recs []Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := settletest.NewStore(t, settle.Config{})
	model := w.Model()
	effects := model.Effects()
	const batch = 100
	mismatches := 0
	seen := map[Identity]bool{}
	for from := 0; from < len(recs); from += batch {
		part := recs[from:min(from+batch, len(recs))]
		in := make([]message.Input, len(part))
		for i, r := range part {
			in[i] = message.Input{Topic: "usage", Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: time.Now()}
		}
		res, err := store.Settle(ctx, "workload-test", store.Decode(in))
		if err != nil {
			t.Fatalf("settle records %d..: %v", from, err)
		}
		for i, got := range res {
			r := &part[i]
			if g := (Expect{Outcome: string(got.Outcome), Reason: got.Reason}); g != r.Expect {
				if mismatches++; mismatches <= 10 {
					t.Errorf("record %d (%s) %s: settle says %s, the model %s", from+i, r.What, r.Value, g, r.Expect)
				}
				continue
			}
			if !r.New() {
				continue
			}
			want, ok := effects[r.Identity]
			if !ok || seen[r.Identity] {
				t.Errorf("record %d %s: identity %s has no effect in the model or two first records (%v)", from+i, r.Value, r.Identity, seen[r.Identity])
				continue
			}
			seen[r.Identity] = true
			var resp message.Response
			if err := json.Unmarshal(got.Response, &resp); err != nil {
				t.Fatalf("record %d: response %s: %v", from+i, got.Response, err)
			}
			sums := map[string]money.Dec{}
			for _, e := range resp.Entries {
				sums[e.Bucket] = sums[e.Bucket].Add(money.MustParse(e.Amount))
			}
			if sums["balance"].Cmp(money.MustParse(want.Balance.String())) != 0 || sums["held"].Cmp(money.MustParse(want.Held.String())) != 0 {
				t.Errorf("record %d %s: entries %v, the model %s balance and %s held", from+i, r.Value, resp.Entries, want.Balance, want.Held)
			}
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d records settled otherwise than the model expects", mismatches, len(recs))
	}
	if len(seen) != len(effects) || int64(len(seen)) != model.ExpectedIdentities() {
		t.Errorf("%d identities settled first, the model has %d effects and expects %d identities", len(seen), len(effects), model.ExpectedIdentities())
	}
	accts := model.Accounts()
	for _, a := range accts {
		views, err := inspect.New(store).Balances(ctx, a.Tenant, a.Subject, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(views) != 1 {
			t.Errorf("account %s/%s: %d views", a.Tenant, a.Subject, len(views))
			continue
		}
		v := views[0]
		if money.MustParse(v.Balance).Cmp(money.MustParse(a.Balance.String())) != 0 || money.MustParse(v.Held).Cmp(money.MustParse(a.Held.String())) != 0 {
			t.Errorf("account %s/%s: balance %s held %s, the model %s and %s", a.Tenant, a.Subject, v.Balance, v.Held, a.Balance, a.Held)
		}
	}
	outcomes := model.Outcomes()
	t.Logf("%d records, %d accounts, outcomes %v, made %v", len(recs), len(accts), outcomes, w.Counts())
	for _, e := range []Expect{{OutcomeSettled, ""}, {OutcomeDuplicate, ""}, {OutcomeQuarantined, ReasonFingerprintMismatch}} {
		if outcomes[e] == 0 {
			t.Errorf("no record expected %s: the workload does not exercise it", e)
		}
	}
}
