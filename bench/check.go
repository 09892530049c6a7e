package bench

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
)

// Checks are the exactly-once invariants as measured at the end of a run.
type Checks struct {
	Inputs               int64       `json:"inputs"`
	Deliveries           int64       `json:"deliveries"`
	DeliveredCoordinates int64       `json:"delivered_coordinates"`
	ExpectedIdentities   int64       `json:"expected_identities"`
	Identities           int64       `json:"identities"`
	Waiting              int64       `json:"waiting"`
	EntriesExpected      int64       `json:"entries_expected"`
	Entries              int64       `json:"entries"`
	SettledEffects       int64       `json:"settled_effects"`
	OutboxSettlements    int64       `json:"outbox_settlements"`
	SplitEffects         int64       `json:"split_effects"`
	BadAccounts          int64       `json:"bad_accounts"`
	Unpublished          int64       `json:"unpublished"`
	Topic                *TopicCheck `json:"topic,omitempty"`
	Violations           []string    `json:"violations,omitempty"`
}

// TopicCheck is what the end-to-end run read back from the output topics.
type TopicCheck struct {
	SettlementMessages    int64 `json:"settlement_messages"`
	DistinctSettlementIDs int64 `json:"distinct_settlement_ids"`
	ResultCoordinates     int64 `json:"result_coordinates"` // distinct input coordinates with a result
}

// check verifies the invariants in the run's database, from the totals
// settle/reconcile counts (and, for the end to end run, what was read from
// the topics). It returns an error naming every
// violated invariant.
func check(ctx context.Context, store *settle.Store, inputs int, expectedNew int64, topic *TopicCheck) (Checks, error) {
	c := Checks{Inputs: int64(inputs), ExpectedIdentities: expectedNew, Topic: topic}
	t, err := reconcile.Count(ctx, store)
	if err != nil {
		return c, fmt.Errorf("check invariants: %w", err)
	}
	c.Deliveries, c.DeliveredCoordinates, c.Identities, c.Waiting = t.Deliveries, t.DeliveredCoordinates, t.Identities, t.Waiting
	c.EntriesExpected, c.Entries, c.SettledEffects, c.OutboxSettlements = t.EntriesExpected, t.Entries, t.SettledEffects, t.OutboxSettlements
	c.SplitEffects, c.BadAccounts, c.Unpublished = t.SplitEffects, t.BadAccounts, t.Unpublished
	v := func(ok bool, format string, args ...any) {
		if !ok {
			c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
		}
	}
	v(c.Deliveries == c.Inputs && c.DeliveredCoordinates == c.Inputs,
		"every input has one delivery: %d inputs, %d deliveries, %d distinct coordinates", c.Inputs, c.Deliveries, c.DeliveredCoordinates)
	v(c.Identities+c.Waiting == c.ExpectedIdentities,
		"one identity per logical record: %d expected, %d stored + %d waiting", c.ExpectedIdentities, c.Identities, c.Waiting)
	v(c.Entries == c.EntriesExpected && c.SplitEffects == 0,
		"one effect per identity: responses announce %d ledger rows, %d written, %d identities with rows from more than one transaction",
		c.EntriesExpected, c.Entries, c.SplitEffects)
	v(c.OutboxSettlements == c.SettledEffects,
		"one settlement message per effect: %d effects, %d outbox rows", c.SettledEffects, c.OutboxSettlements)
	v(c.BadAccounts == 0, "balances = sum of rows: %d accounts differ", c.BadAccounts)
	if topic != nil {
		v(c.Unpublished == 0, "every outbox row published: %d are not", c.Unpublished)
		v(topic.DistinctSettlementIDs == c.SettledEffects,
			"every effect on the settlements topic once: %d effects, %d distinct settlement ids (%d messages)",
			c.SettledEffects, topic.DistinctSettlementIDs, topic.SettlementMessages)
		v(topic.ResultCoordinates == c.Inputs, "every input has a result: %d inputs, %d with a result", c.Inputs, topic.ResultCoordinates)
	}
	if len(c.Violations) > 0 {
		return c, fmt.Errorf("exactly-once invariants violated: %v", c.Violations)
	}
	return c, nil
}
