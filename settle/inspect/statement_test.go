package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestStatementTiesToBalances: on a generated month with corrections,
// refund-then-reclaim pairs, captured, released and expired holds, every
// account's statement adds up: opening + lines = closing, closing + later
// periods = the balance and held settle balance shows; a record of an
// earlier period is the opening, a later one is outside, and a record
// settled after the period closed is a late line apart. Every line is the
// sum of the ledger rows listed under it.
func TestStatementTiesToBalances(t *testing.T) {
	t.Parallel()
	m := settletest.NewMonth(t)
	ctx := context.Background()
	october := settletest.Grant("g-oct", "cust-1", "7")
	october["account_period"] = "2026-10"
	december := settletest.Grant("g-dec", "cust-2", "11")
	december["account_period"] = "2026-12"
	settletest.MustSettle(t, m.Store, settletest.Batch(2, 0, october, december))
	if _, err := m.Store.ClosePeriod(ctx, "acme", "2026-11", "fin"); err != nil {
		t.Fatal(err)
	}
	late := settletest.Grant("g-late", "cust-0", "5")
	if rs := settletest.MustSettle(t, m.Store, settletest.Batch(2, 2, late)); rs[0].Outcome != message.OutcomeSettled {
		t.Fatalf("late grant: %+v", rs[0])
	}

	st, err := inspect.New(m.Store).Statement(ctx, inspect.StatementInput{TenantID: "acme", Period: "2026-11", Rows: true})
	if err != nil {
		t.Fatal(err)
	}
	views, err := inspect.New(m.Store).Balances(ctx, "acme", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Accounts) != settletest.MonthSubjects || len(views) != settletest.MonthSubjects || st.ClosedAt == nil || !st.Ties() {
		t.Fatalf("statement: %d accounts (balances %d), closed %v, ties %v", len(st.Accounts), len(views), st.ClosedAt, st.Ties())
	}
	byKey := map[string]inspect.StatementAccount{}
	for _, a := range st.Accounts {
		byKey[a.Subject] = a
	}
	for _, v := range views {
		a := byKey[v.Subject]
		closing := money.MustParse(a.ClosingBalance).Add(money.MustParse(a.LaterBalance))
		held := money.MustParse(a.ClosingHeld).Add(money.MustParse(a.LaterHeld))
		if closing.String() != v.Balance || held.String() != v.Held || a.Currency != v.Currency {
			t.Errorf("%s: closing %s + later %s, held %s; settle balance shows %s, held %s", v.Subject, a.ClosingBalance, a.LaterBalance, a.ClosingHeld, v.Balance, v.Held)
		}
		if v.Subject != "cust-2" && a.ClosingBalance != v.Balance {
			t.Errorf("%s: closing %s, balance %s (no later period)", v.Subject, a.ClosingBalance, v.Balance)
		}
		sum, sumHeld := money.MustParse(a.OpeningBalance), money.MustParse(a.OpeningHeld)
		for _, l := range a.Lines {
			rows := money.Dec{}
			for _, r := range l.LedgerRows {
				rows = rows.Add(money.MustParse(r.Amount))
			}
			if rows.String() != money.MustParse(l.Amount).String() || int64(len(l.LedgerRows)) != l.Rows {
				t.Errorf("%s %s %s: amount %s over %d rows, its listed rows sum to %s over %d", v.Subject, l.Category, l.Meter, l.Amount, l.Rows, rows, len(l.LedgerRows))
			}
			if l.Bucket == "held" {
				sumHeld = sumHeld.Add(rows)
			} else {
				sum = sum.Add(rows)
			}
		}
		if sum.String() != a.ClosingBalance || sumHeld.String() != a.ClosingHeld {
			t.Errorf("%s: opening + rows = %s, held %s; closing says %s, %s", v.Subject, sum, sumHeld, a.ClosingBalance, a.ClosingHeld)
		}
		if a.Settlements == 0 || a.FirstSequence < 1 || a.LastSequence < a.FirstSequence {
			t.Errorf("%s: %d settlements, sequence %d-%d", v.Subject, a.Settlements, a.FirstSequence, a.LastSequence)
		}
	}
	lines := func(subject string) map[string]inspect.StatementLine {
		out := map[string]inspect.StatementLine{}
		for _, l := range byKey[subject].Lines {
			k := l.Category + " " + l.Meter
			if l.Late {
				k += " late"
			}
			out[k] = l
		}
		return out
	}
	c0 := lines("cust-0")
	// cust-0's hold of 50 is captured by a usage of 30: 30 captured, the
	// other 20 released by the capture (and 20 by its hold_release).
	// cust-0: gpu_seconds usage j = 0, 2, ..., 12 (1+3+...+13 = 49) and
	// the capture's 30; storage_gb j = 1, 3, ..., 13 (2+4+...+14 = 56).
	want := map[string]string{
		"charge gpu_seconds": "-79", "charge storage_gb": "-56", "grant ": "1000", "grant  late": "5",
		"hold_placed ": "70", "hold_captured ": "-30", "hold_released_at_capture ": "-20", "hold_released ": "-20",
	}
	for k, amount := range want {
		if l, ok := c0[k]; !ok || money.MustParse(l.Amount).String() != amount {
			t.Errorf("cust-0 line %q: %+v, want amount %s", k, l, amount)
		}
	}
	for _, k := range []string{"correction gpu_seconds", "correction storage_gb", "refund ", "reclaim "} {
		if _, ok := c0[k]; !ok {
			t.Errorf("cust-0 has no %q line: %v", k, c0)
		}
	}
	if l, ok := lines("cust-2")["hold_expired "]; !ok || l.Amount != "-15" {
		t.Errorf("cust-2's expired hold: %+v", l)
	}
	if a := byKey["cust-1"]; a.OpeningBalance != "7" {
		t.Errorf("cust-1 opening %s, want October's 7", a.OpeningBalance)
	}
	if a := byKey["cust-2"]; a.LaterBalance != "11" {
		t.Errorf("cust-2 later periods %s, want December's 11", a.LaterBalance)
	}
	if byKey["cust-7"].Currency != "EUR" {
		t.Errorf("cust-7 currency %s", byKey["cust-7"].Currency)
	}
}

// TestStatementPartialCapture: grant 1,000, hold 300, a usage of 100 on
// the hold reads as a charge of 100, 100 of the hold captured and the
// other 200 released by the capture; a usage of 80 on a hold of 50 reads
// as a charge of 80 with the hold captured in full and nothing released.
// Each line is the sum of the ledger rows listed under it, and the
// statement still ties to the balance and held amount.
func TestStatementPartialCapture(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	hold := func(id, subject, amount string) map[string]any {
		return settletest.Rec("record_id", id, "kind", "hold", "subject", subject, "amount", amount, "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
	}
	settletest.MustSettle(t, s, settletest.Batch(0, 0,
		settletest.Grant("g-1", "cust-1", "1000"), hold("h-1", "cust-1", "300"),
		settletest.Grant("g-2", "cust-2", "1000"), hold("h-2", "cust-2", "50")))
	rs := settletest.MustSettle(t, s, settletest.Batch(0, 4,
		settletest.Rec("record_id", "u-1", "subject", "cust-1", "amount", "100", "hold_id", "h-1"),
		settletest.Rec("record_id", "u-2", "subject", "cust-2", "amount", "80", "hold_id", "h-2")))
	for _, r := range rs {
		if r.Outcome != message.OutcomeSettled {
			t.Fatalf("capture: %+v", r)
		}
	}
	st, err := inspect.New(s).Statement(context.Background(), inspect.StatementInput{TenantID: "acme", Period: "2026-11", Rows: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"cust-1": {inspect.LineGrant: "1000", inspect.LineCharge: "-100", inspect.LineHoldPlaced: "300",
			inspect.LineHoldCaptured: "-100", inspect.LineHoldCaptureReleased: "-200"},
		"cust-2": {inspect.LineGrant: "1000", inspect.LineCharge: "-80", inspect.LineHoldPlaced: "50", inspect.LineHoldCaptured: "-50"},
	}
	if len(st.Accounts) != 2 || !st.Ties() {
		t.Fatalf("statement: %+v", st)
	}
	for _, a := range st.Accounts {
		got := map[string]string{}
		for _, l := range a.Lines {
			got[l.Category] = money.MustParse(l.Amount).String()
			rows := money.Dec{}
			for _, r := range l.LedgerRows {
				rows = rows.Add(money.MustParse(r.Amount))
			}
			if rows.Cmp(money.MustParse(l.Amount)) != 0 || int64(len(l.LedgerRows)) != l.Rows {
				t.Errorf("%s %s: amount %s over %d rows; its rows %+v", a.Subject, l.Category, l.Amount, l.Rows, l.LedgerRows)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[a.Subject]) {
			t.Errorf("%s: lines %v, want %v", a.Subject, got, want[a.Subject])
		}
		if a.ClosingHeld != "0" {
			t.Errorf("%s: closing held %s, want 0", a.Subject, a.ClosingHeld)
		}
	}
}

// TestStatementReadsTopToBottom: an account with a grant, charges on two
// meters, a correction, a reversal, a refund, a refund-then-reclaim, a
// partial capture, a release and an expiry has its lines in the order a
// controller reads them (charges by meter, corrections, reversals,
// refunds, reclaims, grants, holds placed, captured, released at capture,
// released, expired), each operation under its own name; they sum to its
// closing balance and held amount; a line whose rows are not contiguous
// does not show them as a range; and a listing of more rows than the limit
// is refused, from the lines' counts, before any row is read.
func TestStatementReadsTopToBottom(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	use := func(id, amount, meter string, kv ...any) map[string]any {
		return settletest.Rec(append([]any{"record_id", id, "amount", amount, "meter", meter, "quantity", amount}, kv...)...)
	}
	hold := func(id, amount string, kv ...any) map[string]any {
		return settletest.Rec(append([]any{"record_id", id, "kind", "hold", "amount", amount, "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil}, kv...)...)
	}
	expires := time.Now().Add(time.Second)
	settletest.MustSettle(t, s, settletest.Batch(0, 0,
		settletest.Grant("g-1", "cust-1", "1000"),
		use("u-1", "100", "gpu_seconds"), use("u-2", "50", "storage_gb"), use("u-3", "30", "gpu_seconds"), use("u-4", "20", "gpu_seconds"),
		hold("h-1", "300"), hold("h-2", "40"), hold("h-3", "25", "expires_at", expires.UTC().Format(time.RFC3339Nano))))
	rs := settletest.MustSettle(t, s, settletest.Batch(0, 8,
		use("c-1", "80", "gpu_seconds", "kind", "correction", "corrects", "u-1", "finalization_version", 2),
		settletest.Rec("record_id", "rv-1", "kind", "reversal", "corrects", "u-2", "amount", nil, "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
		settletest.Signal("refund", "u-3", "cust-1"), settletest.Signal("reclaim", "u-3", "cust-1"), settletest.Signal("refund", "u-4", "cust-1"),
		use("u-5", "100", "gpu_seconds", "hold_id", "h-1"), settletest.Signal("hold_release", "h-2", "cust-1")))
	for _, r := range rs {
		if r.Outcome != message.OutcomeSettled {
			t.Fatalf("setup: %+v", r)
		}
	}
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	if n, err := s.ExpireHolds(ctx); err != nil || n != 1 {
		t.Fatalf("expire holds: %d, %v", n, err)
	}
	st, err := inspect.New(s).Statement(ctx, inspect.StatementInput{TenantID: "acme", Period: "2026-11", Rows: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Accounts) != 1 || !st.Ties() {
		t.Fatalf("statement: %+v", st)
	}
	a := st.Accounts[0]
	var got []string
	sum, held := money.Dec{}, money.Dec{}
	for _, l := range a.Lines {
		got = append(got, fmt.Sprintf("%s %s %s", l.Category, l.Meter, money.MustParse(l.Amount)))
		if l.Bucket == "held" {
			held = held.Add(money.MustParse(l.Amount))
		} else {
			sum = sum.Add(money.MustParse(l.Amount))
		}
		if l.Category == inspect.LineCharge && l.Meter == "gpu_seconds" && strings.HasPrefix(l.RowSpan(), "rows ") {
			t.Errorf("charge gpu_seconds: rows %d over ids %d-%d shown as %q, a range that hides gaps", l.Rows, l.FirstRowID, l.LastRowID, l.RowSpan())
		}
	}
	want := []string{
		"charge gpu_seconds -250", "charge storage_gb -50", "correction gpu_seconds 20", "reversal  50", "refund  50", "reclaim  -30",
		"grant  1000", "hold_placed  365", "hold_captured  -100", "hold_released_at_capture  -200", "hold_released  -40", "hold_expired  -25",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("lines\n got %s\nwant %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
	if sum.String() != "790" || a.ClosingBalance != "790" || held.String() != "0" || a.ClosingHeld != "0" || a.Balance != "790" || a.Held != "0" {
		t.Errorf("lines sum to %s, held %s; closing %s, held %s; balance %s, held %s: want 790 and 0 throughout",
			sum, held, a.ClosingBalance, a.ClosingHeld, a.Balance, a.Held)
	}
	_, err = inspect.New(s).Statement(ctx, inspect.WithRowsMax(inspect.StatementInput{TenantID: "acme", Period: "2026-11", Rows: true}, 5))
	if !errors.Is(err, inspect.ErrBadFilter) || !strings.Contains(err.Error(), "has 18 ledger rows, more than the 5") {
		t.Errorf("a listing over the limit: %v, want refused from the lines' count of 18 rows", err)
	}
}
