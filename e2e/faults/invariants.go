package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
)

// Report is what Check found: the figures of the run, and reconcile's
// verdict, which every invariant is read from (settle/reconcile holds the
// checks; faults keeps no SQL of its own).
type Report struct {
	Inputs     int64 // records in the usage topic
	Deliveries int64 // delivery rows
	Settled    int64 // identities settled

	// Counts of reconcile's findings by what they break; every one must be
	// zero (OK reads the whole report, these only name the usual ones).
	DoubleEffects   int64 // effect_repeated, identity_duplicated: an effect written twice, a scope key claimed twice
	Gaps            int64 // delivery_gap: offsets below PostgreSQL's next offset with no delivery row
	Lost            int64 // (final) record_not_delivered: records below the end offsets with no delivery row
	OffsetsAhead    int64 // kafka_offset_ahead: partitions whose Kafka commit is ahead of PostgreSQL's
	BalanceMismatch int64 // balance_mismatch, settlement_sequence_broken: balance, held or seq off their rows
	ModelMismatch   int64 // (final, with a model) account_model_mismatch
	Unpublished     int64 // outbox_unpublished (final: any age), outbox_parked

	Reconcile *reconcile.Report
}

// OK reports whether every invariant held: reconcile found nothing.
func (r Report) OK() bool { return r.Reconcile != nil && r.Reconcile.Clean() }

// Found is how many findings of class reconcile reported.
func (r Report) Found(class string) int64 {
	var n int64
	if r.Reconcile != nil {
		for _, f := range r.Reconcile.Findings {
			if f.Class == class {
				n++
			}
		}
	}
	return n
}

func (r Report) String() string {
	s := fmt.Sprintf("inputs=%d deliveries=%d settled=%d double_effects=%d gaps=%d lost=%d offsets_ahead=%d balance_mismatch=%d model_mismatch=%d unpublished=%d",
		r.Inputs, r.Deliveries, r.Settled, r.DoubleEffects, r.Gaps, r.Lost, r.OffsetsAhead, r.BalanceMismatch, r.ModelMismatch, r.Unpublished)
	if r.Reconcile == nil {
		return s
	}
	s += fmt.Sprintf(" findings=%d", len(r.Reconcile.Findings))
	for i, f := range r.Reconcile.Findings {
		if i == 20 {
			s += fmt.Sprintf("\n  ... %d more", len(r.Reconcile.Findings)-i)
			break
		}
		s += "\n  " + f.Class + ": " + f.Detail
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

// Check checks the invariants through settle/reconcile, given the group's
// Kafka offsets (read first: PostgreSQL's only grow, so a live pipeline
// cannot raise a false alarm). With final, the run is over: every record
// below the topic's end offsets must have its delivery row, every outbox
// row must be published whatever its age, and every account of expect
// (the workload model's Accounts; nil: none) must hold its balance and
// held amount.
func Check(ctx context.Context, tg Target, final bool, expect []workload.Account) (Report, error) {
	if tg.Group == "" {
		tg.Group = "settle"
	}
	if tg.Topic == "" {
		tg.Topic = "usage"
	}
	var r Report
	committed, ends, err := kafkaOffsets(ctx, tg.Brokers, tg.Group, tg.Topic)
	if err != nil {
		return r, err
	}
	for _, e := range ends {
		r.Inputs += e
	}
	store, err := settle.Open(ctx, tg.Pool, settle.Config{})
	if err != nil {
		return r, fmt.Errorf("check: %w", err)
	}
	in := reconcile.Input{Group: tg.Group, SourceTopic: tg.Topic,
		KafkaOffsets: map[string]map[int32]int64{tg.Topic: committed}}
	if final {
		in.EndOffsets = map[string]map[int32]int64{tg.Topic: ends}
		in.OutboxGrace = time.Nanosecond
		if expect != nil {
			in.ExpectedAccounts = make([]reconcile.ExpectedAccount, 0, len(expect))
			for _, a := range expect {
				in.ExpectedAccounts = append(in.ExpectedAccounts, reconcile.ExpectedAccount{TenantID: a.Tenant, Subject: a.Subject,
					Currency: a.Currency, Balance: a.Balance.String(), Held: a.Held.String()})
			}
		}
	}
	if r.Reconcile, err = reconcile.Run(ctx, store, in); err != nil {
		return r, fmt.Errorf("check: %w", err)
	}
	t, err := reconcile.Count(ctx, store)
	if err != nil {
		return r, fmt.Errorf("check: %w", err)
	}
	r.Deliveries, r.Settled = t.Deliveries, t.Settled
	r.DoubleEffects = r.Found(reconcile.ClassEffectRepeated) + r.Found(reconcile.ClassIdentityDuplicated)
	r.Gaps = r.Found(reconcile.ClassDeliveryGap)
	r.Lost = r.Found(reconcile.ClassRecordNotDelivered)
	r.OffsetsAhead = r.Found(reconcile.ClassKafkaOffsetAhead)
	r.BalanceMismatch = r.Found(reconcile.ClassBalanceMismatch) + r.Found(reconcile.ClassSequenceBroken)
	r.ModelMismatch = r.Found(reconcile.ClassAccountModelMismatch)
	r.Unpublished = r.Found(reconcile.ClassOutboxUnpublished) + r.Found(reconcile.ClassOutboxParked)
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
	store, err := settle.Open(ctx, tg.Pool, settle.Config{})
	if err != nil {
		return false, nil //nolint:nilerr // the database may be restarting: asked again
	}
	p, err := reconcile.ReadProgress(ctx, store)
	if err != nil {
		return false, nil //nolint:nilerr // the database may be restarting: asked again
	}
	return p.Deliveries == inputs && p.Unpublished == 0, nil
}
