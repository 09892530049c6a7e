package faults

import (
	"github.com/twmb/franz-go/pkg/kgo"

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
