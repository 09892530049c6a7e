package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// TestBalanceAndPeriodClose: settle balance gives an account's balance and
// available amount (JSON and text), and each ledger row with the balance
// and held it left; period close makes a later record of
// the period settle flagged late; closing it again exits 0 saying it was
// already closed (it failed on the insert's "no rows": seen failing); a bad
// period exits 2.
func TestBalanceAndPeriodClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, store := settledDatabase(t,
		acmeRecord(`"record_id":"g","kind":"grant","amount":"100","currency":"USD"`),
		acmeRecord(`"record_id":"u","kind":"usage","amount":"30","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":1`),
		acmeRecord(`"record_id":"h","kind":"hold","amount":"20","currency":"USD"`),
		acmeRecord(`"record_id":"c","kind":"correction","corrects":"u","amount":"25","currency":"USD","meter":"m","quantity":"1","unit":"s","finalization_version":2`),
	)
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"balance", "acme", "cust-1", "--json", "--database-url", url}, &out, &errOut); code != exitOK {
		t.Fatalf("balance: exit %d: %s", code, errOut.String())
	}
	var accounts []inspect.AccountView
	if err := json.Unmarshal(out.Bytes(), &accounts); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(accounts) != 1 || accounts[0].Balance != "75" || accounts[0].Held != "20" || accounts[0].Available != "55" ||
		len(accounts[0].Holds) != 1 || len(accounts[0].Rows) != 4 || len(accounts[0].Chains) != 1 || accounts[0].Chains[0].NetCharge != "25" {
		t.Errorf("balance = %+v", accounts)
	}
	// Each row, newest first, with the balance and held it left.
	var after []string
	for _, r := range accounts[0].Rows {
		after = append(after, r.Bucket+" "+r.Amount+": "+r.BalanceAfter+"/"+r.HeldAfter)
	}
	if got, want := strings.Join(after, ", "), "balance 5: 75/20, held 20: 70/20, balance -30: 70/0, balance 100: 100/0"; got != want {
		t.Errorf("rows with the balance after each: %s, want %s", got, want)
	}
	out.Reset()
	if code := run(ctx, []string{"balance", "acme", "--database-url", url}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "available 55") ||
		!strings.Contains(out.String(), "20 to held") || !strings.Contains(out.String(), "then balance 70, held 20") {
		t.Errorf("balance text: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"period", "close", "acme", "2026-11", "--as", "fin", "--database-url", url}, &out, &errOut); code != exitOK {
		t.Fatalf("period close: exit %d: %s", code, errOut.String())
	}
	rs, err := store.Settle(ctx, "", store.Decode([]message.Input{{Topic: "usage", Offset: 4, Value: []byte(acmeRecord(`"record_id":"late","kind":"grant","amount":"1","currency":"USD"`))}}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rs[0].Response), `"late":true`) {
		t.Errorf("a record of a closed period settles flagged late: %s", rs[0].Response)
	}
	// Closing it again changes nothing and says so (it failed on the
	// pipeline's "no rows in result set").
	out.Reset()
	if code := run(ctx, []string{"period", "close", "acme", "2026-11", "--as", "fin", "--database-url", url}, &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), "period 2026-11 of acme was already closed") {
		t.Errorf("period close again: exit %d: %s %s", code, out.String(), errOut.String())
	}
	if code := run(ctx, []string{"period", "close", "acme", "2026-13x", "--as", "fin", "--database-url", url}, &out, &errOut); code != exitUsage {
		t.Errorf("bad period: exit %d, want %d", code, exitUsage)
	}
}
