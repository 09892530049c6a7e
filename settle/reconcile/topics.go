package reconcile

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// periodIdentity is one stored identity of the tenant and period compared.
type periodIdentity struct {
	id           int64
	recordID, op string
	outcome      string
	settlementID string
	source       message.Coordinates
	hasLedger    bool
	marked       bool  // its settlement's outbox row is marked published
	sequence     int64 // the per-account sequence its response carries
}

func loadPeriodIdentities(ctx context.Context, tx pgx.Tx, tenant, period, settlementsTopic string) ([]periodIdentity, error) {
	rows, err := db.On(tx).ReconcileIdentities(ctx, db.ReconcileIdentitiesParams{TenantID: tenant, Period: period, SettlementsTopic: settlementsTopic})
	if err != nil {
		return nil, err
	}
	var out []periodIdentity
	for _, r := range rows {
		out = append(out, periodIdentity{id: r.ID, recordID: r.RecordID, op: r.Operation, outcome: r.Outcome, settlementID: r.SettlementID,
			source:    message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			hasLedger: r.HasLedger, marked: r.Marked, sequence: r.Sequence})
	}
	return out, nil
}

// compareSource compares the usage topic's records of the tenant and
// period with the deliveries and identities stored for them.
func (s *checker) compareSource(ctx context.Context, tx pgx.Tx, in Input, ids []periodIdentity) ([]Finding, error) {
	// Offsets PostgreSQL reached: a record past them is not settled yet
	// (lag), not a discrepancy.
	offsets, err := settle.ConsumerOffsetsIn(ctx, tx, in.Group)
	if err != nil {
		return nil, err
	}
	reached := offsets[in.SourceTopic]
	delivered, err := deliveredSources(ctx, tx, in)
	if err != nil {
		return nil, err
	}
	exists, err := deliveredIdentities(ctx, tx, in, delivered)
	if err != nil {
		return nil, err
	}
	var out []Finding
	seen := map[message.Coordinates]bool{}
	for _, sr := range in.Source {
		c := sr.Source
		seen[c] = true
		switch {
		case !delivered[c] && c.Offset < reached[c.Partition]:
			out = append(out, Finding{Class: ClassSourceNotSettled, TenantID: in.TenantID, Period: in.Period,
				RecordID: sr.RecordID, Operation: sr.Operation, Source: &c,
				Detail: fmt.Sprintf("usage record at %s/%d/%d is behind the group's offset %d in PostgreSQL but has no delivery row", c.Topic, c.Partition, c.Offset, reached[c.Partition])})
		case delivered[c] && !exists[[2]string{sr.RecordID, sr.Operation}]:
			// A dead-lettered record's delivery names no identity; a
			// delivered record of this tenant and period decoded, so it
			// must have one (settled, refused, quarantined or waiting).
			out = append(out, Finding{Class: ClassSourceIdentityMissing, TenantID: in.TenantID, Period: in.Period,
				RecordID: sr.RecordID, Operation: sr.Operation, Source: &c,
				Detail: "usage record was delivered but its identity is neither stored nor waiting"})
		}
	}
	return append(out, identitiesWithoutSource(in, ids, seen)...), nil
}

// deliveredSources returns which of the source records have a delivery row.
func deliveredSources(ctx context.Context, tx pgx.Tx, in Input) (map[message.Coordinates]bool, error) {
	topics := make([]string, len(in.Source))
	parts := make([]int32, len(in.Source))
	offs := make([]int64, len(in.Source))
	for i, sr := range in.Source {
		topics[i], parts[i], offs[i] = sr.Source.Topic, sr.Source.Partition, sr.Source.Offset
	}
	rows, err := db.On(tx).ReconcileDeliveries(ctx, db.ReconcileDeliveriesParams{
		Topics: topics, Partitions: parts, Offsets: offs, TenantID: in.TenantID, Period: in.Period})
	if err != nil {
		return nil, err
	}
	delivered := map[message.Coordinates]bool{}
	for _, r := range rows {
		delivered[message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}] = true
	}
	return delivered, nil
}

// deliveredIdentities returns, by (record_id, operation), whether the
// delivered source records have an identity (settled, refused, quarantined,
// or still waiting).
func deliveredIdentities(ctx context.Context, tx pgx.Tx, in Input, delivered map[message.Coordinates]bool) (map[[2]string]bool, error) {
	var recs, ops []string
	for _, sr := range in.Source {
		if delivered[sr.Source] {
			recs, ops = append(recs, sr.RecordID), append(ops, sr.Operation)
		}
	}
	rows, err := db.On(tx).ReconcileIdentityKeys(ctx, db.ReconcileIdentityKeysParams{
		TenantID: in.TenantID, Period: in.Period, RecordIds: recs, Operations: ops})
	if err != nil {
		return nil, err
	}
	exists := map[[2]string]bool{}
	for _, r := range rows {
		exists[[2]string{r.RecordID, r.Operation}] = r.Found
	}
	return exists, nil
}

// identitiesWithoutSource reports the stored identities that name a record
// of the usage topic the source does not hold (seen), unless retention
// removed it.
func identitiesWithoutSource(in Input, ids []periodIdentity, seen map[message.Coordinates]bool) []Finding {
	var out []Finding
	for _, pi := range ids {
		if pi.source.Topic != in.SourceTopic || seen[pi.source] {
			continue
		}
		if start, ok := in.SourceStart[pi.source.Partition]; ok && pi.source.Offset < start {
			continue // left the topic by retention
		}
		c := pi.source
		out = append(out, Finding{Class: ClassIdentityNoSource, TenantID: in.TenantID, Period: in.Period,
			RecordID: pi.recordID, Operation: pi.op, SettlementID: pi.settlementID, Source: &c,
			Detail: fmt.Sprintf("identity %d (%s) names usage record %s/%d/%d, which is not on the topic for this tenant and period", pi.id, pi.outcome, c.Topic, c.Partition, c.Offset)})
	}
	return out
}

// compareSettlements compares the settlements topic's messages of the
// tenant and period with the stored effects, by settlement_id. A message
// published twice is at-least-once delivery, not a difference.
func compareSettlements(in Input, ids []periodIdentity) []Finding {
	published := map[string]bool{}
	var out []Finding
	for _, p := range in.Published {
		published[p.SettlementID] = true
		if p.HeaderSettlementID != p.SettlementID {
			c := p.Source
			out = append(out, Finding{Class: ClassSettlementHeaderMismatch, TenantID: in.TenantID, Period: in.Period,
				RecordID: p.RecordID, Operation: p.Operation, SettlementID: p.SettlementID, Source: &c,
				Detail: fmt.Sprintf("message at %s/%d@%d: header settlement_id %q, body %q", c.Topic, c.Partition, c.Offset, p.HeaderSettlementID, p.SettlementID)})
		}
	}
	known := map[string]*periodIdentity{}
	for i := range ids {
		pi := &ids[i]
		if pi.settlementID == "" {
			continue
		}
		if k := known[pi.settlementID]; k == nil || !k.hasLedger {
			known[pi.settlementID] = pi // a copy stored twice is checkIdentityDuplicates's
		}
		// Not yet marked published: the relay's pending work (the outbox
		// check reports it once it is older than the grace period).
		if pi.outcome == string(message.OutcomeSettled) && pi.hasLedger && pi.marked && !published[pi.settlementID] {
			out = append(out, Finding{Class: ClassSettlementNotOnTopic, TenantID: in.TenantID, Period: in.Period,
				RecordID: pi.recordID, Operation: pi.op, SettlementID: pi.settlementID,
				Detail: fmt.Sprintf("identity %d wrote ledger rows and its outbox row is marked published, but its settlement is not on the settlements topic", pi.id)})
		}
	}
	reported := map[string]bool{}
	for _, p := range in.Published {
		if pi := known[p.SettlementID]; pi != nil {
			switch {
			case reported[p.SettlementID]:
			case pi.outcome != string(message.OutcomeSettled) || !pi.hasLedger:
				// Only an effect is published: a settlement with no
				// ledger rows behind it was never one.
				reported[p.SettlementID] = true
				out = append(out, Finding{Class: ClassSettlementNoIdentity, TenantID: in.TenantID, Period: in.Period,
					RecordID: p.RecordID, Operation: p.Operation, SettlementID: p.SettlementID, Source: &p.Source,
					Detail: fmt.Sprintf("a message on the settlements topic names identity %d, which is %s and wrote no ledger rows it could publish", pi.id, pi.outcome)})
			case p.Sequence != pi.sequence:
				c := p.Source
				out = append(out, Finding{Class: ClassSettlementSequenceMismatch, TenantID: in.TenantID, Period: in.Period,
					RecordID: p.RecordID, Operation: p.Operation, SettlementID: p.SettlementID, Source: &c,
					Detail: fmt.Sprintf("message at %s/%d@%d carries sequence %d; identity %d stored %d", c.Topic, c.Partition, c.Offset, p.Sequence, pi.id, pi.sequence)})
			}
			continue
		}
		if reported[p.SettlementID] {
			continue
		}
		reported[p.SettlementID] = true
		c := p.Source
		out = append(out, Finding{Class: ClassSettlementNoIdentity, TenantID: in.TenantID, Period: in.Period,
			RecordID: p.RecordID, Operation: p.Operation, SettlementID: p.SettlementID, Source: &c,
			Detail: "a message on the settlements topic names a settlement no stored identity made"})
	}
	return out
}
