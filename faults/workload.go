package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/money"
)

// Model is the workload generator and the model of its effects: every
// account's expected balance and held amount. It is not the model of
// settle/model_test.go (that one is unexported in a test package): it is a
// plain sum, exact because the generator only emits records whose outcome it
// knows — each account's records share one partition, so they settle in the
// order generated; grants are large enough that no hold is refused; a
// correction names a chain that is not refunded, with the next version; a
// refund names a charged chain once; a capture or release names an active
// hold once.
//
// Kinds emitted: grant, usage, exact duplicates (same bytes, new offset),
// conflicts (same record_id, another amount: quarantined, no effect),
// correction, refund, hold, hold_release, and usage capturing a hold.
type Model struct {
	rng        *rand.Rand
	partitions int32
	accounts   []*modelAccount
	seq        int
	Records    int            // records generated
	Kinds      map[string]int // generated records by kind (dup and conflict counted apart)
}

type modelAccount struct {
	tenant, subject string
	partition       int32
	balance, held   money.Dec
	granted         bool
	chains          []*modelChain
	holds           []*modelHold
	sent            [][]byte // earlier payloads, for duplicates
	sentUsage       []map[string]any
}

type modelChain struct {
	recordID string
	net      money.Dec
	version  int
	refunded bool
}

type modelHold struct {
	recordID string
	amount   money.Dec
	active   bool
}

// NewModel returns a generator over accounts accounts spread on partitions
// partitions.
func NewModel(seed uint64, accounts int, partitions int32) *Model {
	m := &Model{rng: rand.New(rand.NewPCG(seed, seed^0x5e771e)), partitions: partitions, Kinds: map[string]int{}}
	for i := 0; i < accounts; i++ {
		a := &modelAccount{tenant: fmt.Sprintf("t%d", i%3), subject: fmt.Sprintf("acct-%04d", i)}
		h := fnv.New32a()
		h.Write([]byte(a.tenant + "/" + a.subject))
		a.partition = int32(h.Sum32() % uint32(partitions))
		m.accounts = append(m.accounts, a)
	}
	return m
}

func (m *Model) amount() string {
	if m.rng.IntN(4) == 0 {
		return fmt.Sprintf("%d.%02d", 1+m.rng.IntN(99), m.rng.IntN(100))
	}
	return fmt.Sprint(1 + m.rng.IntN(100))
}

func (m *Model) base(a *modelAccount, kind, recordID string) map[string]any {
	return map[string]any{
		"tenant_id": a.tenant, "account_period": "2026-11", "record_id": recordID, "kind": kind,
		"subject": a.subject, "occurred_at": "2026-11-03T10:00:00Z",
	}
}

func (m *Model) usage(a *modelAccount, recordID, amount string) map[string]any {
	r := m.base(a, "usage", recordID)
	r["amount"], r["currency"], r["meter"], r["quantity"], r["unit"], r["finalization_version"] = amount, "USD", "gpu_seconds", amount, "s", 1
	return r
}

// Next returns n more records, each on its account's partition, and
// advances the model.
func (m *Model) Next(n int) []*kgo.Record {
	out := make([]*kgo.Record, 0, n)
	for len(out) < n {
		a := m.accounts[m.rng.IntN(len(m.accounts))]
		kind, r, raw := m.pick(a)
		if r != nil {
			b, err := json.Marshal(r)
			if err != nil {
				panic(err)
			}
			raw = b
			if kind == "usage" || kind == "grant" || kind == "hold" {
				a.sent = append(a.sent, b)
			}
		}
		m.Kinds[kind]++
		m.Records++
		out = append(out, &kgo.Record{Topic: "usage", Partition: a.partition, Key: []byte(a.tenant + "/" + a.subject), Value: raw})
	}
	return out
}

// pick chooses the next record of a and applies its effect to the model.
func (m *Model) pick(a *modelAccount) (string, map[string]any, []byte) {
	m.seq++
	id := fmt.Sprintf("r%d", m.seq)
	if !a.granted {
		a.granted = true
		amt := "1000000"
		a.balance = a.balance.Add(money.MustParse(amt))
		r := m.base(a, "grant", id)
		r["amount"], r["currency"] = amt, "USD"
		return "grant", r, nil
	}
	switch x := m.rng.IntN(100); {
	case x < 8 && len(a.sent) > 0: // exact duplicate
		return "duplicate", nil, a.sent[m.rng.IntN(len(a.sent))]
	case x < 12 && len(a.sentUsage) > 0: // conflict: same identity, other amount
		u := a.sentUsage[m.rng.IntN(len(a.sentUsage))]
		c := map[string]any{}
		for k, v := range u {
			c[k] = v
		}
		c["amount"] = fmt.Sprintf("%s.5", u["amount"].(string)[:1]+"000") // never equal to the stored amount
		return "conflict", c, nil
	case x < 22 && len(a.chains) > 0: // correction to a new total
		ch := a.chains[m.rng.IntN(len(a.chains))]
		if ch.refunded {
			break
		}
		total := m.amount()
		ch.version++
		r := m.usage(a, id, total)
		r["kind"], r["corrects"], r["finalization_version"] = "correction", ch.recordID, ch.version
		t := money.MustParse(total)
		a.balance = a.balance.Sub(t.Sub(ch.net))
		ch.net = t
		return "correction", r, nil
	case x < 28 && len(a.chains) > 0: // refund
		ch := a.chains[m.rng.IntN(len(a.chains))]
		if ch.refunded {
			break
		}
		ch.refunded = true
		a.balance = a.balance.Add(ch.net)
		return "refund", m.base(a, "refund", ch.recordID), nil
	case x < 36: // hold
		amt := m.amount()
		a.held = a.held.Add(money.MustParse(amt))
		a.holds = append(a.holds, &modelHold{recordID: id, amount: money.MustParse(amt), active: true})
		r := m.base(a, "hold", id)
		r["amount"], r["currency"] = amt, "USD"
		return "hold", r, nil
	case x < 42 && len(a.holds) > 0: // release
		h := a.holds[m.rng.IntN(len(a.holds))]
		if !h.active {
			break
		}
		h.active = false
		a.held = a.held.Sub(h.amount)
		return "hold_release", m.base(a, "hold_release", h.recordID), nil
	case x < 48 && len(a.holds) > 0: // capture: charged in full, the hold released
		h := a.holds[m.rng.IntN(len(a.holds))]
		if !h.active {
			break
		}
		h.active = false
		a.held = a.held.Sub(h.amount)
		amt := m.amount()
		a.balance = a.balance.Sub(money.MustParse(amt))
		r := m.usage(a, id, amt)
		r["hold_id"] = h.recordID
		a.chains = append(a.chains, &modelChain{recordID: id, net: money.MustParse(amt), version: 1})
		return "capture", r, nil
	case x < 52: // grant
		amt := m.amount()
		a.balance = a.balance.Add(money.MustParse(amt))
		r := m.base(a, "grant", id)
		r["amount"], r["currency"] = amt, "USD"
		return "grant", r, nil
	}
	amt := m.amount()
	a.balance = a.balance.Sub(money.MustParse(amt))
	r := m.usage(a, id, amt)
	a.chains = append(a.chains, &modelChain{recordID: id, net: money.MustParse(amt), version: 1})
	a.sentUsage = append(a.sentUsage, r)
	return "usage", r, nil
}

// compare counts the accounts whose balance or held amount differ from the
// model.
func (m *Model) compare(ctx context.Context, pool *pgxpool.Pool) (int64, []string, error) {
	got := map[string][2]string{}
	rows, err := pool.Query(ctx, `SELECT tenant_id, subject, balance::text, held::text FROM accounts WHERE currency = 'USD'`)
	if err != nil {
		return 0, nil, err
	}
	for rows.Next() {
		var t, s, b, h string
		if err := rows.Scan(&t, &s, &b, &h); err != nil {
			return 0, nil, err
		}
		got[t+"/"+s] = [2]string{b, h}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	var bad int64
	var details []string
	for _, a := range m.accounts {
		if !a.granted {
			continue
		}
		g, ok := got[a.tenant+"/"+a.subject]
		wantB, wantH := a.balance.String(), a.held.String()
		if !ok || money.MustParse(g[0]).Cmp(a.balance) != 0 || money.MustParse(g[1]).Cmp(a.held) != 0 {
			bad++
			if len(details) < 10 {
				details = append(details, fmt.Sprintf("account %s/%s: balance %s held %s, model %s and %s", a.tenant, a.subject, g[0], g[1], wantB, wantH))
			}
		}
	}
	return bad, details, nil
}
