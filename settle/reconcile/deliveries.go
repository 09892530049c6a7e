package reconcile

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// The delivery checks: every record read has one delivery row, below
// PostgreSQL's offsets and, for a finished run, below the topics' end
// offsets.

func (s *checker) checkDeliveryRepeated(ctx context.Context, tx pgx.Tx, _ Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileDeliveryRepeated(ctx)
	return findings(rows, err, func(r db.ReconcileDeliveryRepeatedRow) Finding {
		c := message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		return Finding{Class: ClassDeliveryRepeated, Source: &c,
			Detail: fmt.Sprintf("record %s/%d@%d has %d delivery rows (%s); a record is delivered once", c.Topic, c.Partition, c.Offset, r.Deliveries, r.Outcomes)}
	})
}

// pruned reports whether settle prune ever removed delivery rows (repeats,
// dead letters, the canary's history): then a missing one no longer shows a
// record passed over; and tenantPruned whether the canary's retention
// removed history of tenant: then its records and settlements on the
// topics may have no rows any more.
func pruned(ctx context.Context, tx pgx.Tx, tenant string) (any, tenantPruned bool, err error) {
	r, err := db.On(tx).ReconcilePruned(ctx, tenant)
	return r.Pruned, r.TenantPruned, err
}

// bounds flattens offsets by topic and partition into the arrays the
// delivery statements take, in order.
func bounds(offsets map[string]map[int32]int64) (topics []string, parts []int32, offs []int64) {
	type tp struct {
		t string
		p int32
	}
	var keys []tp
	for t, ps := range offsets {
		for p := range ps {
			keys = append(keys, tp{t, p})
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].t < keys[j].t || (keys[i].t == keys[j].t && keys[i].p < keys[j].p) })
	for _, k := range keys {
		topics, parts, offs = append(topics, k.t), append(parts, k.p), append(offs, offsets[k.t][k.p])
	}
	return topics, parts, offs
}

// missingDeliveries makes a Finding of class of every offset below
// offsets with no delivery row.
func missingDeliveries(ctx context.Context, tx pgx.Tx, offsets map[string]map[int32]int64, class, why string) ([]Finding, error) {
	topics, parts, offs := bounds(offsets)
	rows, err := db.On(tx).ReconcileDeliveryMissing(ctx, db.ReconcileDeliveryMissingParams{Topics: topics, Partitions: parts, Bounds: offs})
	return findings(rows, err, func(r db.ReconcileDeliveryMissingRow) Finding {
		c := message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		return Finding{Class: class, Source: &c,
			Detail: fmt.Sprintf("record %s/%d@%d has no delivery row, %s %d", c.Topic, c.Partition, c.Offset, why, offsets[c.Topic][c.Partition])}
	})
}

// checkDeliveryGaps finds the offsets below the group's offsets in
// PostgreSQL with no delivery row: the offset and the delivery are written
// in one transaction, so a gap is a record passed over. Run reports it
// skipped once settle prune has run.
func (s *checker) checkDeliveryGaps(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	pg, err := settle.ConsumerOffsetsIn(ctx, tx, in.Group)
	if err != nil {
		return nil, err
	}
	return missingDeliveries(ctx, tx, pg, ClassDeliveryGap, "below group "+in.Group+"'s next offset in PostgreSQL,")
}

// checkEveryRecordDelivered compares a finished run's end offsets with the
// delivery rows: one for every record below them, none past them, and,
// given the results topic, a result for every record below them.
func (s *checker) checkEveryRecordDelivered(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	out, err := missingDeliveries(ctx, tx, in.EndOffsets, ClassRecordNotDelivered, "although the run is over: the topic's end offset is")
	if err != nil {
		return nil, err
	}
	topics, parts, offs := bounds(in.EndOffsets)
	rows, err := db.On(tx).ReconcileDeliveryPastEnd(ctx, db.ReconcileDeliveryPastEndParams{Topics: topics, Partitions: parts, Bounds: offs})
	past, err := findings(rows, err, func(r db.ReconcileDeliveryPastEndRow) Finding {
		c := message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		return Finding{Class: ClassDeliveryPastEnd, Source: &c,
			Detail: fmt.Sprintf("delivery row (%s) at %s/%d@%d, at or past the topic's end offset %d: no such record was read", r.Outcome, c.Topic, c.Partition, c.Offset, in.EndOffsets[c.Topic][c.Partition])}
	})
	if err != nil {
		return nil, err
	}
	return append(out, past...), nil
}

// resultsMissing reports every record below the end offsets that no
// message on the results topic names.
func resultsMissing(in Input) []Finding {
	resulted := make(map[message.Coordinates]bool, len(in.Results))
	for _, c := range in.Results {
		resulted[c] = true
	}
	topics, parts, offs := bounds(in.EndOffsets)
	var out []Finding
	for i := range topics {
		for o := int64(0); o < offs[i] && len(out) < 10000; o++ {
			c := message.Coordinates{Topic: topics[i], Partition: parts[i], Offset: o}
			if !resulted[c] {
				out = append(out, Finding{Class: ClassResultMissing, Source: &c,
					Detail: fmt.Sprintf("record %s/%d@%d has no message on the results topic", c.Topic, c.Partition, c.Offset)})
			}
		}
	}
	return out
}
