package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle/reconcile"
)

// TestMonthEndSourceExport: a generated month of three tenants (grants,
// usages on two meters and in two currencies, corrections, one whose own
// record_id is another usage's, refunds, refund-then-reclaim pairs, holds
// captured in part and in full) settled by `settle run` from the loopback
// broker. `settle reconcile --source` of an export of exactly what one
// tenant produced exits 0 with no finding and totals equal to the
// month's charges; the same export with a record dropped, one added, and
// one usage's amount, another's currency and another's subject changed
// exits 3 and reports exactly those, with totals that differ by exactly
// their amounts.
func TestMonthEndSourceExport(t *testing.T) {
	t.Parallel()
	const partitions = 3
	k := kafkatest.NewCluster(t, partitions)
	url := emptyDatabase(t)
	migrateDB(t, url)
	pool := openPool(t, url)

	rec := func(tenant, subject, id, kind string, kv ...any) map[string]any {
		m := map[string]any{"tenant_id": tenant, "account_period": "2026-11", "record_id": id, "kind": kind, "subject": subject,
			"occurred_at": "2026-11-03T10:00:00Z"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	produced := map[string][]map[string]any{}
	// want: each tenant's chains' final charges by currency (the source's
	// totals), from the records as generated.
	want := map[string]map[string]money.Dec{}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		want[tenant] = map[string]money.Dec{}
		add := func(cur, amount string) { want[tenant][cur] = want[tenant][cur].Add(money.MustParse(amount)) }
		var first, second []map[string]any
		for si := range 4 {
			s := fmt.Sprintf("cust-%d", si)
			cur := "USD"
			if si == 3 {
				cur = "EUR"
			}
			use := func(id, amount string, kv ...any) map[string]any {
				meter := "gpu_seconds"
				if len(id)%2 == 0 {
					meter = "storage_gb"
				}
				return rec(tenant, s, id, "usage", append([]any{"amount", amount, "currency", cur, "meter", meter, "quantity", amount, "unit", "s",
					"finalization_version", 1}, kv...)...)
			}
			first = append(first, rec(tenant, s, "g-"+s, "grant", "amount", "10000", "currency", cur),
				rec(tenant, s, "h-part-"+s, "hold", "amount", "300", "currency", cur),
				rec(tenant, s, "h-full-"+s, "hold", "amount", "20", "currency", cur))
			for j := range 25 {
				id := fmt.Sprintf("u-%s-%d", s, j)
				amount := fmt.Sprint(j + 1)
				first = append(first, use(id, amount))
				switch {
				case j%6 == 0: // corrected by a correction whose record_id is the next usage's
					fixed := fmt.Sprint(2*j + 5)
					c := use(fmt.Sprintf("u-%s-%d", s, j+1), fixed, "kind", "correction", "corrects", id, "finalization_version", 2)
					second = append(second, c)
					add(cur, fixed)
				case j%6 == 2:
					second = append(second, rec(tenant, s, id, "refund"))
				case j%6 == 3:
					second = append(second, rec(tenant, s, id, "refund"), rec(tenant, s, id, "reclaim"))
					add(cur, amount)
				default:
					add(cur, amount)
				}
			}
			second = append(second, use("cap-part-"+s, "100", "hold_id", "h-part-"+s), use("cap-full-"+s, "80", "hold_id", "h-full-"+s))
			add(cur, "100")
			add(cur, "80")
		}
		produced[tenant] = append(first, second...)
	}
	cl := producer(t, k.Brokers)
	var recs []*kgo.Record
	n := 0
	for _, tenant := range []string{"acme", "globex", "initech"} {
		for _, r := range produced[tenant] {
			b, _ := json.Marshal(r)
			key := tenant + "/" + r["subject"].(string)
			recs = append(recs, &kgo.Record{Topic: "usage", Partition: int32(len(key) % partitions), Key: []byte(key), Value: b})
			n++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := runner{t: t, url: url, brokers: k.Brokers, group: "e2e-monthend"}
	inst := r.start("month")
	waitDeliveries(t, pool, n, 2*time.Minute, func() error {
		if inst.Exited() {
			return fmt.Errorf("settle exited on its own (code %d)", inst.ExitCode(0))
		}
		return nil
	})
	for deadline := time.Now().Add(time.Minute); outboxBacklog(t, pool) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("outbox not published within a minute")
		}
	}
	inst.stop(t)

	dir := t.TempDir()
	check := func(name string, export []map[string]any) (int, reconcile.SourceReport) {
		t.Helper()
		var b strings.Builder
		for _, r := range export {
			j, _ := json.Marshal(r)
			b.Write(j)
			b.WriteByte('\n')
		}
		path := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startSettle(t, "reconcile-"+name, nil, "reconcile", "--database-url", url, "--tenant", "acme", "--period", "2026-11",
			"--source", path, "--json")
		code := p.ExitCode(time.Minute)
		var rep reconcile.SourceReport
		if err := json.Unmarshal([]byte(p.Stdout()), &rep); err != nil {
			t.Fatalf("%s: exit %d, %v\n%s\n%s", name, code, err, p.Stdout(), p.Log())
		}
		return code, rep
	}
	totals := func(rep reconcile.SourceReport) map[string][3]string {
		m := map[string][3]string{}
		for _, tot := range rep.Totals {
			m[tot.Currency] = [3]string{tot.Source, tot.Settle, tot.Difference}
		}
		return m
	}

	code, rep := check("exact", produced["acme"])
	wantTotals := map[string][3]string{}
	for cur, d := range want["acme"] {
		wantTotals[cur] = [3]string{d.String(), d.String(), "0"}
	}
	if code != 0 || len(rep.Findings) != 0 || fmt.Sprint(totals(rep)) != fmt.Sprint(wantTotals) {
		t.Errorf("exact export: exit %d, findings %+v, totals %v; want exit 0, none, %v", code, rep.Findings, totals(rep), wantTotals)
	}

	var planted []map[string]any
	for _, r := range produced["acme"] {
		c := map[string]any{}
		for k, v := range r {
			c[k] = v
		}
		switch r["record_id"] {
		case "u-cust-0-1": // dropped: settled, absent from the export (charge 2, USD)
			if r["kind"] == "usage" {
				continue
			}
		case "u-cust-1-4": // amount 5 -> 7
			c["amount"] = "7"
		case "u-cust-2-5": // USD -> EUR (6)
			c["currency"] = "EUR"
		case "u-cust-1-10": // another subject
			c["subject"] = "cust-9"
		}
		planted = append(planted, c)
	}
	planted = append(planted, rec("acme", "cust-0", "u-never-sent", "usage", "amount", "9", "currency", "USD", "meter", "gpu_seconds",
		"quantity", "9", "unit", "s", "finalization_version", 1))
	code, rep = check("planted", planted)
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Class+" "+f.RecordID+" "+f.Operation)
	}
	sort.Strings(got)
	wantF := []string{
		"different u-cust-1-4 usage", "different u-cust-1-10 usage", "different u-cust-2-5 usage",
		"extra u-cust-0-1 usage", "missing u-never-sent usage",
		"net_charge_differs u-cust-1-4 usage", "net_charge_differs u-cust-2-5 usage",
	}
	sort.Strings(wantF)
	if code != 3 || strings.Join(got, "; ") != strings.Join(wantF, "; ") {
		t.Errorf("planted export: exit %d, findings\n got %s\nwant %s", code, strings.Join(got, "; "), strings.Join(wantF, "; "))
	}
	// settle - source: USD +2 (dropped) -2 (5 -> 7) +6 (moved to EUR)
	// -9 (never sent) = -3; EUR -6.
	diffs := map[string]string{}
	for cur, tr := range totals(rep) {
		diffs[cur] = tr[2]
	}
	if diffs["USD"] != "-3" || diffs["EUR"] != "-6" {
		t.Errorf("planted export: total differences %v, want USD -3, EUR -6 (%+v)", diffs, rep.Totals)
	}
}
