package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/workload"
)

// Report is what Check found. Every count but Inputs, Deliveries and
// Settled must be zero.
type Report struct {
	Inputs     int64 // records in the usage topic
	Deliveries int64 // delivery rows
	Settled    int64 // identities settled

	DoubleEffects   int64 // identities with two rows in one bucket, or a scope key claimed twice
	Gaps            int64 // offsets below PostgreSQL's next offset with no delivery row
	Lost            int64 // (final) input records with no delivery row
	OffsetsAhead    int64 // partitions whose Kafka commit is ahead of PostgreSQL's
	BalanceMismatch int64 // accounts whose balance, held or seq differ from their rows
	ModelMismatch   int64 // (final, with a model) accounts whose balance or held differ from the model
	Unpublished     int64 // (final) outbox rows not published

	Details []string
}

// OK reports whether every invariant held.
func (r Report) OK() bool {
	return r.DoubleEffects == 0 && r.Gaps == 0 && r.Lost == 0 && r.OffsetsAhead == 0 &&
		r.BalanceMismatch == 0 && r.ModelMismatch == 0 && r.Unpublished == 0
}

func (r Report) String() string {
	s := fmt.Sprintf("inputs=%d deliveries=%d settled=%d double_effects=%d gaps=%d lost=%d offsets_ahead=%d balance_mismatch=%d model_mismatch=%d unpublished=%d",
		r.Inputs, r.Deliveries, r.Settled, r.DoubleEffects, r.Gaps, r.Lost, r.OffsetsAhead, r.BalanceMismatch, r.ModelMismatch, r.Unpublished)
	if len(r.Details) > 0 {
		s += "\n  " + strings.Join(r.Details, "\n  ")
	}
	return s
}

// Target names what Check looks at.
type Target struct {
	Pool    *pgxpool.Pool
	Brokers []string
	Group   string // "" = "settle"
	Topic   string // "" = "usage"
}

// Check checks the invariants. With final, the run is over: every input
// record must have its delivery row, every outbox row must be published, and
// every account of expect (the workload model's Accounts; nil: none) must
// hold its balance and held amount.
func Check(ctx context.Context, tg Target, final bool, expect []workload.Account) (Report, error) {
	if tg.Group == "" {
		tg.Group = "settle"
	}
	if tg.Topic == "" {
		tg.Topic = "usage"
	}
	var r Report
	q := func(dst *int64, sql string, args ...any) error {
		if err := tg.Pool.QueryRow(ctx, sql, args...).Scan(dst); err != nil {
			return fmt.Errorf("check: %s: %w", strings.Fields(sql)[0:3], err)
		}
		return nil
	}
	if err := q(&r.Deliveries, `SELECT count(*) FROM deliveries WHERE topic = $1`, tg.Topic); err != nil {
		return r, err
	}
	if err := q(&r.Settled, `SELECT count(*) FROM identities WHERE outcome = 'settled'`); err != nil {
		return r, err
	}
	// One effect per identity.
	var a, b int64
	if err := q(&a, `SELECT count(*) FROM (SELECT 1 FROM ledger_entries GROUP BY identity_id, bucket HAVING count(*) > 1) x`); err != nil {
		return r, err
	}
	if err := q(&b, `SELECT count(*) FROM (SELECT 1 FROM identities GROUP BY tenant_id, account_period, record_id, operation HAVING count(*) > 1) x`); err != nil {
		return r, err
	}
	r.DoubleEffects = a + b
	// Balances equal rows.
	if err := q(&r.BalanceMismatch, `
		SELECT count(*) FROM accounts a
		 WHERE a.balance <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.account_id = a.id AND bucket = 'balance'), 0)
		    OR a.held <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.account_id = a.id AND bucket = 'held'), 0)
		    OR a.seq <> (SELECT count(DISTINCT identity_id) FROM ledger_entries e WHERE e.account_id = a.id)`); err != nil {
		return r, err
	}
	// No gap below PostgreSQL's offsets: every record the database says it
	// has passed has its delivery row.
	if err := q(&r.Gaps, `
		SELECT coalesce(sum(o.next_offset - (SELECT count(*) FROM deliveries d
		        WHERE d.topic = o.topic AND d.partition = o.partition AND d."offset" < o.next_offset)), 0)
		  FROM consumer_offsets o WHERE o.group_id = $1 AND o.topic = $2`, tg.Group, tg.Topic); err != nil {
		return r, err
	}
	pgOffsets, err := perPartition(ctx, tg.Pool, `SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2`, tg.Group, tg.Topic)
	if err != nil {
		return r, err
	}
	// Kafka's commits not ahead of PostgreSQL's.
	committed, ends, err := kafkaOffsets(ctx, tg.Brokers, tg.Group, tg.Topic)
	if err != nil {
		return r, err
	}
	for p, k := range committed {
		if k > pgOffsets[p] {
			r.OffsetsAhead++
			r.Details = append(r.Details, fmt.Sprintf("partition %d: kafka committed %d, postgres %d", p, k, pgOffsets[p]))
		}
	}
	for _, e := range ends {
		r.Inputs += e
	}
	if final {
		delivered, err := perPartition(ctx, tg.Pool, `SELECT partition, count(*) FROM deliveries WHERE topic = $1 GROUP BY 1`, tg.Topic)
		if err != nil {
			return r, err
		}
		for p, e := range ends {
			if d := e - delivered[p]; d > 0 {
				r.Lost += d
				r.Details = append(r.Details, fmt.Sprintf("partition %d: %d records, %d delivery rows", p, e, delivered[p]))
			}
		}
		if err := q(&r.Unpublished, `SELECT count(*) FROM outbox_queue`); err != nil {
			return r, err
		}
		if expect != nil {
			n, details, err := compareAccounts(ctx, tg.Pool, expect)
			if err != nil {
				return r, err
			}
			r.ModelMismatch, r.Details = n, append(r.Details, details...)
		}
	}
	return r, nil
}

// kafkaOffsets returns the group's committed offsets and the end offsets of
// topic, by partition.
func kafkaOffsets(ctx context.Context, brokers []string, group, topic string) (committed, ends map[int32]int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	committed, ends = map[int32]int64{}, map[int32]int64{}
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if err == nil {
		resps.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.Err == nil && o.At >= 0 {
				committed[o.Partition] = o.At
			}
		})
	}
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			ends[o.Partition] = o.Offset
		}
	})
	return committed, ends, nil
}

// Done reports whether the service has caught up: every input record has a
// delivery row, the outbox is empty and Kafka's commits reached the end of
// every partition.
func Done(ctx context.Context, tg Target) (bool, error) {
	if tg.Group == "" {
		tg.Group = "settle"
	}
	if tg.Topic == "" {
		tg.Topic = "usage"
	}
	committed, ends, err := kafkaOffsets(ctx, tg.Brokers, tg.Group, tg.Topic)
	if err != nil {
		return false, nil //nolint:nilerr // the broker may be restarting: not done yet, asked again
	}
	var inputs int64
	for p, e := range ends {
		inputs += e
		if committed[p] < e {
			return false, nil
		}
	}
	var deliveries, unpublished int64
	if err := tg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM deliveries WHERE topic = $1), (SELECT count(*) FROM outbox_queue)`, tg.Topic).Scan(&deliveries, &unpublished); err != nil {
		return false, nil //nolint:nilerr // the database may be restarting: asked again
	}
	return deliveries == inputs && unpublished == 0, nil
}

// perPartition runs a query of (partition, number) rows into a map.
func perPartition(ctx context.Context, pool *pgxpool.Pool, query string, args ...any) (map[int32]int64, error) {
	rows, err := pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, rows.Err()
}
