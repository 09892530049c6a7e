package faults

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/workload"
)

// WorkloadMix is what the fault tests send: every kind whose effect a
// crash could double or lose — grants, usage, exact duplicates (same bytes,
// new offset), conflicts (quarantined, no effect), corrections, refunds,
// holds, releases and captures.
var WorkloadMix = workload.Mix{Duplicates: 0.08, Conflicts: 0.04, Corrections: 0.10, Refunds: 0.06,
	Holds: 0.08, Releases: 0.06, Captures: 0.06, Grants: 0.04}

// NewWorkload returns the fault tests' workload for seed: accounts subjects
// over three tenants, on UsagePartitions partitions.
func NewWorkload(seed uint64, accounts int) (*workload.Workload, error) {
	return workload.New(workload.Config{Tenants: 3, Subjects: accounts, Partitions: UsagePartitions,
		Period: "2026-11", Seed: seed, Mix: WorkloadMix})
}

// KafkaRecords makes records for the usage topic, each on the partition it
// names.
func KafkaRecords(rs []workload.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(rs))
	for i := range rs {
		out[i] = &kgo.Record{Topic: "usage", Partition: rs[i].Partition, Key: rs[i].Key, Value: rs[i].Value}
	}
	return out
}

// compareAccounts counts the accounts whose balance or held amount differ
// from expect, and describes the first ten.
func compareAccounts(ctx context.Context, pool *pgxpool.Pool, expect []workload.Account) (int64, []string, error) {
	got := map[string][2]string{}
	rows, err := pool.Query(ctx, `SELECT tenant_id, subject, currency, balance::text, held::text FROM accounts`)
	if err != nil {
		return 0, nil, err
	}
	for rows.Next() {
		var t, s, c, b, h string
		if err := rows.Scan(&t, &s, &c, &b, &h); err != nil {
			return 0, nil, err
		}
		got[t+"/"+s+"/"+c] = [2]string{b, h}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	var bad int64
	var details []string
	for _, a := range expect {
		g, ok := got[a.Tenant+"/"+a.Subject+"/"+a.Currency]
		if !ok || money.MustParse(g[0]).Cmp(money.MustParse(a.Balance.String())) != 0 || money.MustParse(g[1]).Cmp(money.MustParse(a.Held.String())) != 0 {
			bad++
			if len(details) < 10 {
				details = append(details, fmt.Sprintf("account %s/%s: balance %s held %s, model %s and %s", a.Tenant, a.Subject, g[0], g[1], a.Balance, a.Held))
			}
		}
	}
	return bad, details, nil
}
