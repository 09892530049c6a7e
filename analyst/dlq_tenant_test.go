package analyst_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// TestDeadLettersUnderTheirTenant: a record that does not decode but whose
// bytes name its tenant is dead-lettered under that tenant, and its result
// carries the identity fields it names; a token of acme lists acme's
// letter and not globex's; explain of the record names its letter. A
// redelivery of the same input record is
// answered from the letter (no second letter).
func TestDeadLettersUnderTheirTenant(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	ctx := context.Background()
	bad := func(tenant string, off int64) message.Input {
		return message.Input{Topic: "usage", Partition: 3, Offset: off, Value: []byte(`{"tenant_id":"` + tenant +
			`","account_period":"2026-11","record_id":"t-` + tenant + `","kind":"usage","amount":"four"}`)}
	}
	ins := []message.Input{bad("acme", 900), bad("globex", 901)}
	rs, err := f.store.Settle(ctx, "g", f.store.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "globex"} {
		r := rs[i]
		if r.Outcome != message.OutcomeDeadLettered || r.Identity == nil || r.Identity.TenantID != tenant ||
			r.Identity.AccountPeriod != "2026-11" || r.Identity.RecordID != "t-"+tenant || r.Identity.Operation != "usage" {
			t.Errorf("the result of %s's bad record: %+v identity %+v", tenant, r, r.Identity)
		}
	}
	code, body := f.call(t, "ana", "GET", "/api/dlq?topic=usage&limit=1000", "", "")
	var ds []inspect.DeadLetter
	if code != 200 || json.Unmarshal([]byte(body), &ds) != nil {
		t.Fatalf("ana's dead letters: %d %s", code, body)
	}
	seen := map[int64]string{}
	for _, d := range ds {
		seen[d.Source.Offset] = d.TenantID
		if d.TenantID != "acme" {
			t.Errorf("ana sees dead letter %d of tenant %q", d.ID, d.TenantID)
		}
	}
	if seen[900] != "acme" {
		t.Errorf("ana's dead letters %v hold no acme letter at offset 900", seen)
	}
	// Explain of the record names its letter (it has nothing else).
	code, body = f.call(t, "ana", "GET", "/api/explain/acme/2026-11/t-acme", "", "")
	var e inspect.Explanation
	if code != 200 || json.Unmarshal([]byte(body), &e) != nil || len(e.Letters) != 1 || e.Letters[0].Reason != "invalid_field" ||
		e.Letters[0].Correction != nil || e.Empty() {
		t.Errorf("explain of acme's dead-lettered record: %d %s", code, body)
	}
	if _, page := f.call(t, "ana", "GET", "/explain?tenant=acme&period=2026-11&record=t-acme", "", ""); !strings.Contains(page, `id="letters"`) {
		t.Errorf("the explain page of acme's dead-lettered record lists no letter")
	}
	again, err := f.store.Settle(ctx, "g", f.store.Decode(ins[:1]))
	if err != nil || again[0].Outcome != message.OutcomeDeadLettered || !again[0].Redelivered {
		t.Fatalf("a redelivery: %+v, %v", again, err)
	}
	all, err := inspect.New(f.store).DeadLetters(ctx, inspect.DeadLetterFilter{Topic: "usage", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range all {
		if d.Source.Partition == 3 && d.Source.Offset == 900 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d letters of the input record at usage/3@900 after its redelivery, want 1", n)
	}
}
