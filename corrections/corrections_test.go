package corrections

import (
	"testing"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

func charged(amount string, version int64) Chain {
	return Chain{NetCharge: money.MustParse(amount), Version: version}
}

// TestCorrectOrdering: a correction applies the difference of its total to
// the chain's: a later version applies, an earlier one is refused
// superseded, the same version with another total is quarantined
// version_conflict, a reversal needs no version; two corrections end the
// same in either order.
func TestCorrectOrdering(t *testing.T) {
	c := charged("40", 2)
	for _, tc := range []struct {
		total   string
		version int64
		verdict Verdict
		reason  string
		delta   string
	}{
		{"30", 3, Apply, "", "10"},  // lower total: credit the difference
		{"55", 3, Apply, "", "-15"}, // higher total: charge the difference
		{"0", 0, Apply, "", "40"},   // reversal without version
		{"30", 1, Refuse, ReasonSuperseded, "0"},
		{"30", 2, Quarantine, ReasonVersionConflict, "0"},
	} {
		d := Correct(c, money.MustParse(tc.total), tc.version)
		if d.Verdict != tc.verdict || d.Reason != tc.reason || d.Delta.String() != tc.delta {
			t.Errorf("Correct(40@v2, %s@v%d) = %v %q %s, want %v %q %s", tc.total, tc.version, d.Verdict, d.Reason, d.Delta, tc.verdict, tc.reason, tc.delta)
		}
	}
	// Two corrections with distinct versions end the same in any order.
	a := Correct(Correct(c, money.MustParse("10"), 3).Next, money.MustParse("20"), 4)
	b := Correct(c, money.MustParse("20"), 4)
	b2 := Correct(b.Next, money.MustParse("10"), 3)
	if a.Next.NetCharge.String() != "20" || b2.Verdict != Refuse || b.Next.NetCharge.String() != "20" {
		t.Errorf("order dependence: %s vs %s (%v)", a.Next.NetCharge, b.Next.NetCharge, b2.Verdict)
	}
}

// TestRestate: an analyst's restatement moves the total against the chain
// as it is and keeps its version, so the producer's next version applies.
func TestRestate(t *testing.T) {
	c := charged("20", 2)
	d := Restate(c, money.MustParse("15"))
	if d.Verdict != Apply || d.Delta.String() != "5" || d.Next.NetCharge.String() != "15" || d.Next.Version != 2 {
		t.Errorf("Restate(20@v2, 15) = %v delta %s next %s@v%d, want apply delta 5 next 15@v2", d.Verdict, d.Delta, d.Next.NetCharge, d.Next.Version)
	}
	if n := Correct(d.Next, money.MustParse("25"), 3); n.Verdict != Apply || n.Delta.String() != "-10" {
		t.Errorf("the producer's v3 after a restatement = %v delta %s, want apply delta -10", n.Verdict, n.Delta)
	}
	refunded := c
	refunded.Refunded = true
	if d := Restate(refunded, money.MustParse("15")); d.Verdict != Quarantine || d.Reason != ReasonTargetRefunded {
		t.Errorf("Restate of a refunded chain = %v %q, want quarantine target_refunded", d.Verdict, d.Reason)
	}
}

// TestRefundThenRecover: any order of failure and success signals, each
// duplicated, nets to one charge.
func TestRefundThenRecover(t *testing.T) {
	net := func(signals string) money.Dec {
		c := charged("40", 1)
		total := money.MustParse("-40")
		for _, s := range signals {
			var d Decision
			if s == 'F' {
				d = RefundChain(c)
			} else {
				d = ReclaimChain(c)
			}
			if d.Verdict == Apply {
				total = total.Add(d.Delta)
				c = d.Next
			}
		}
		return total
	}
	for signals, want := range map[string]string{
		"": "-40", "F": "0", "FF": "0", "FS": "-40", "FSS": "-40", "FFSS": "-40",
		"S": "-40", "SF": "-40", "SSFF": "-40", "FSF": "-40", "SFS": "-40",
	} {
		if got := net(signals); got.String() != want {
			t.Errorf("signals %q: net %s, want %s", signals, got, want)
		}
	}
	if d := RefundChain(charged("0", 1)); d.Reason != ReasonNothingToRefund {
		t.Errorf("refund of a zero chain: %q", d.Reason)
	}
	c := RefundChain(charged("40", 1)).Next
	if d := Correct(c, money.MustParse("10"), 2); d.Reason != ReasonTargetRefunded {
		t.Errorf("correction of a refunded chain: %q", d.Reason)
	}
}

// TestChainTarget: a target resolves by kind, as the contract says: the
// usage, correction or reversal at a record_id stand for their chain; a
// record of another kind there, or members of two chains, is invalid;
// refunds, reclaims and releases at it are operations on it, not targets.
func TestChainTarget(t *testing.T) {
	type add struct {
		kind record.Kind
		root int64
	}
	cases := []struct {
		name string
		adds []add
		root int64
		want Target
	}{
		{"nothing", nil, 0, TargetMissing},
		{"a usage", []add{{record.KindUsage, 7}}, 7, TargetFound},
		{"a usage and its refund", []add{{record.KindRefund, 0}, {record.KindUsage, 7}, {record.KindReclaim, 0}}, 7, TargetFound},
		{"a correction of another chain", []add{{record.KindCorrection, 9}}, 9, TargetFound},
		{"members of two chains", []add{{record.KindUsage, 7}, {record.KindCorrection, 9}}, 0, TargetInvalid},
		{"a hold", []add{{record.KindHold, 0}}, 0, TargetInvalid},
		{"a usage and a grant", []add{{record.KindUsage, 7}, {record.KindGrant, 0}}, 0, TargetInvalid},
		{"a member without a chain", []add{{record.KindUsage, 0}}, 0, TargetInvalid},
	}
	for _, c := range cases {
		var ct ChainTarget
		for _, a := range c.adds {
			ct.Add(a.kind, a.root)
		}
		if root, got := ct.Resolve(); root != c.root || got != c.want {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, root, got, c.root, c.want)
		}
	}
}
