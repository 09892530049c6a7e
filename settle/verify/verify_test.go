package verify_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/settle/verify"
)

// month is the settlements topic of a generated month, settled by the
// service from the usage topic of a loopback broker.
type month struct {
	k     *kafkatest.Cluster
	msgs  []*kgo.Record // the settlements topic, in order
	model *workload.Model
}

// generateMonth runs the service over a workload of corrections, refunds,
// grants, duplicates and conflicts and returns its settlements topic.
func generateMonth(t *testing.T) *month {
	t.Helper()
	k := kafkatest.NewCluster(t, 2)
	store := settletest.NewStore(t, settle.Config{})
	s, err := service.New(service.Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer: consumer.Config{SessionTimeout: time.Second}, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	w, err := workload.New(workload.Config{Tenants: 3, Subjects: 30, Partitions: 2, Period: "2026-11", Seed: 56,
		Mix: workload.Mix{Duplicates: 0.05, Conflicts: 0.03, Corrections: 0.1, Refunds: 0.05, Grants: 0.05,
			Holds: 0.05, Releases: 0.03, Captures: 0.03}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var recs []*kgo.Record
	for _, r := range w.Take(n) {
		recs = append(recs, &kgo.Record{Topic: "usage", Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	k.Produce(t, recs...)
	pool := store.Pool()
	testnet.WaitFor(t, "every record answered", 60*time.Second, func() bool {
		var sum int64
		for _, c := range s.Counts() {
			sum += c
		}
		return sum >= n
	})
	effects := settletest.Count(t, pool, "select count(distinct identity_id) from ledger_entries")
	msgs := k.Read(t, "settlements", effects, 60*time.Second)
	if len(msgs) != effects {
		t.Fatalf("settlements topic: %d messages, %d effects", len(msgs), effects)
	}
	kinds := map[string]int{}
	for _, r := range msgs {
		kinds[decode(t, r).Kind]++
	}
	t.Logf("a month of %d records: %d settlements by kind %v", n, len(msgs), kinds)
	return &month{k: k, msgs: msgs, model: w.Model()}
}

// topic copies msgs, in order, to a new topic of one partition.
func (m *month) topic(t *testing.T, name string, msgs []*kgo.Record) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, name); err != nil {
		t.Fatal(err)
	}
	if len(msgs) > 0 {
		m.produce(t, name, msgs)
	}
	return name
}

func (m *month) produce(t *testing.T, topic string, msgs []*kgo.Record) {
	t.Helper()
	var out []*kgo.Record
	for _, r := range msgs {
		out = append(out, &kgo.Record{Topic: topic, Partition: 0, Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	m.k.Produce(t, out...)
}

func (m *month) verify(t *testing.T, cfg verify.Config) (*verify.Report, *verify.Heads) {
	t.Helper()
	cfg.Brokers = m.k.Brokers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, heads, err := verify.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep, heads
}

func decode(t *testing.T, r *kgo.Record) message.Response {
	t.Helper()
	var m message.Response
	if err := json.Unmarshal(r.Value, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// pick is the index of a message of sequence 2 or more whose account has
// a later message: tampering with it breaks something the verifier sees.
func pick(t *testing.T, msgs []*kgo.Record) int {
	t.Helper()
	last := map[string]int64{}
	for _, r := range msgs {
		m := decode(t, r)
		last[m.Identity.TenantID+"/"+m.Subject+"/"+m.Currency] = m.Sequence
	}
	for i := len(msgs) / 2; i < len(msgs); i++ {
		m := decode(t, msgs[i])
		if m.Sequence >= 2 && last[m.Identity.TenantID+"/"+m.Subject+"/"+m.Currency] > m.Sequence {
			return i
		}
	}
	t.Fatal("no message with a predecessor and a successor on its account")
	return 0
}

func only(t *testing.T, rep *verify.Report, kind, subject string, seq int64) verify.Finding {
	t.Helper()
	if len(rep.Findings) != 1 {
		t.Fatalf("findings: %+v, want one %s", rep.Findings, kind)
	}
	f := rep.Findings[0]
	if f.Kind != kind || f.Subject != subject || f.Sequence != seq {
		t.Fatalf("finding %+v, want %s of account %s at sequence %d", f, kind, subject, seq)
	}
	return f
}

// TestVerify checks the settlements topic of a generated month (the
// service settling a workload of grants, usage, corrections, refunds,
// duplicates and conflicts on a loopback broker) from the topic alone:
// clean, with totals equal to the workload model's balances; then a copy
// of it with one message removed, one settlement repeated with other
// content, and one whose amount was changed and its chain_hash recomputed
// without its successors' — each reported with its account and sequence;
// and a range verified from the archived heads of the one before it after
// the broker deleted that one's messages.
func TestVerify(t *testing.T) {
	m := generateMonth(t)
	clean := m.topic(t, "clean", m.msgs)

	t.Run("clean", func(t *testing.T) {
		var progress []verify.Progress
		rep, heads := m.verify(t, verify.Config{Topic: clean, From: "2026-11", To: "2026-11",
			ProgressEvery: time.Nanosecond, Progress: func(p verify.Progress) { progress = append(progress, p) }})
		if len(progress) == 0 || progress[0].Total != int64(len(m.msgs)) || progress[len(progress)-1].Read > int64(len(m.msgs)) {
			t.Errorf("progress %+v over %d messages", progress, len(m.msgs))
		}
		if !rep.Clean() {
			t.Fatalf("findings on the service's own topic: %+v", rep.Findings)
		}
		if rep.Checked != int64(len(m.msgs)) || len(heads.Heads) != rep.Accounts || rep.Digest != heads.Digest || len(rep.Digest) != 64 {
			t.Fatalf("report %+v of %d messages", rep, len(m.msgs))
		}
		// The totals are what the model says each tenant's accounts hold.
		want, held := map[string]money.Dec{}, map[string]money.Dec{}
		for _, a := range m.model.Accounts() {
			want[a.Tenant] = want[a.Tenant].Add(money.MustParse(a.Balance.String()))
			held[a.Tenant] = held[a.Tenant].Add(money.MustParse(a.Held.String()))
		}
		if len(rep.Totals) != len(want) {
			t.Fatalf("totals %+v, want one per tenant of %v", rep.Totals, want)
		}
		for _, tot := range rep.Totals {
			if tot.Period != "2026-11" || tot.Currency != "USD" || tot.Balance != want[tot.Tenant].String() || tot.Held != held[tot.Tenant].String() {
				t.Errorf("total %+v, model's balance %s held %s", tot, want[tot.Tenant], held[tot.Tenant])
			}
		}
		// One tenant: only its accounts, the same heads as in the whole.
		one, _ := m.verify(t, verify.Config{Topic: clean, Tenant: "t-1"})
		if !one.Clean() || len(one.Totals) != 1 || one.Totals[0].Tenant != "t-1" || one.Checked == 0 || one.Checked >= rep.Checked {
			t.Fatalf("tenant t-1: %+v", one)
		}
		// A period range outside the month: chains checked, nothing totalled.
		none, _ := m.verify(t, verify.Config{Topic: clean, From: "2026-12"})
		if !none.Clean() || len(none.Totals) != 0 || none.Digest != rep.Digest {
			t.Fatalf("from 2026-12: %+v", none)
		}
	})

	t.Run("canary left out of the totals", func(t *testing.T) {
		sid := "canary-1"
		head := message.ChainHash(nil, canary.Tenant, "canary", "USD", sid, "balance", "-0.01")
		v, _ := json.Marshal(message.Response{Version: 1, Outcome: message.OutcomeSettled, SettlementID: sid,
			Identity: message.IdentityJSON{TenantID: canary.Tenant, AccountPeriod: "2026-11", RecordID: "r-same", Operation: "usage"},
			Kind:     "usage", Subject: "canary", Currency: "USD", Entries: []message.Entry{{Bucket: "balance", Amount: "-0.01"}},
			Sequence: 1, ChainHash: hex.EncodeToString(head)})
		topic := m.topic(t, "with-canary", append(append([]*kgo.Record{}, m.msgs...), &kgo.Record{Key: []byte("k"), Value: v}))
		rep, _ := m.verify(t, verify.Config{Topic: topic})
		all, _ := m.verify(t, verify.Config{Topic: topic, IncludeCanary: true})
		if !rep.Clean() || !all.Clean() || rep.Checked != all.Checked || rep.Accounts != all.Accounts {
			t.Fatalf("with a canary settlement: %+v / %+v", rep, all)
		}
		for _, tot := range rep.Totals {
			if tot.Tenant == canary.Tenant {
				t.Errorf("the canary is totalled by default: %+v", tot)
			}
		}
		if len(all.Totals) != len(rep.Totals)+1 || all.Totals[0].Tenant != canary.Tenant || all.Totals[0].Balance != "-0.01" {
			t.Errorf("--include-canary totals %+v, want the canary's -0.01 besides %+v", all.Totals, rep.Totals)
		}
	})

	t.Run("message removed", func(t *testing.T) {
		i := pick(t, m.msgs)
		gone := decode(t, m.msgs[i])
		msgs := append(append([]*kgo.Record{}, m.msgs[:i]...), m.msgs[i+1:]...)
		rep, _ := m.verify(t, verify.Config{Topic: m.topic(t, "removed", msgs)})
		f := only(t, rep, verify.KindSequenceGap, gone.Subject, gone.Sequence+1)
		if !strings.Contains(f.Detail, fmt.Sprintf("%d..%d are missing", gone.Sequence, gone.Sequence)) || f.Tenant != gone.Identity.TenantID {
			t.Fatalf("finding %+v does not name the missing sequence %d of %s", f, gone.Sequence, gone.Identity.TenantID)
		}
	})

	t.Run("settlement repeated with other content", func(t *testing.T) {
		i := pick(t, m.msgs)
		orig := decode(t, m.msgs[i])
		other := orig
		other.BalanceAfter = "1" + orig.BalanceAfter
		b, _ := json.Marshal(other)
		msgs := append(append([]*kgo.Record{}, m.msgs[:i+3]...), &kgo.Record{Key: m.msgs[i].Key, Value: b, Headers: m.msgs[i].Headers})
		msgs = append(msgs, m.msgs[i+3:]...)
		// An identical repeat is the relay's republishing, not a finding.
		msgs = append(msgs, m.msgs[i])
		rep, _ := m.verify(t, verify.Config{Topic: m.topic(t, "repeated", msgs)})
		only(t, rep, verify.KindSettlementDiffers, orig.Subject, orig.Sequence)
		if rep.Repeats != 1 {
			t.Fatalf("repeats %d, want the identical one", rep.Repeats)
		}
	})

	t.Run("amount changed and hash recomputed", func(t *testing.T) {
		i := pick(t, m.msgs)
		changed := decode(t, m.msgs[i])
		var prev []byte
		for j := i - 1; j >= 0; j-- {
			p := decode(t, m.msgs[j])
			if p.Identity.TenantID == changed.Identity.TenantID && p.Subject == changed.Subject && p.Sequence == changed.Sequence-1 {
				prev, _ = hex.DecodeString(p.ChainHash)
				break
			}
		}
		if prev == nil {
			t.Fatal("no predecessor")
		}
		changed.Entries = append([]message.Entry{}, changed.Entries...)
		changed.Entries[0].Amount = money.MustParse(changed.Entries[0].Amount).Add(money.MustParse("-1")).String()
		h := prev
		for _, e := range changed.Entries {
			h = message.ChainHash(h, changed.Identity.TenantID, changed.Subject, changed.Currency, changed.SettlementID, e.Bucket, e.Amount)
		}
		changed.ChainHash = hex.EncodeToString(h)
		b, _ := json.Marshal(changed)
		msgs := append([]*kgo.Record{}, m.msgs...)
		msgs[i] = &kgo.Record{Key: m.msgs[i].Key, Value: b, Headers: m.msgs[i].Headers}
		rep, _ := m.verify(t, verify.Config{Topic: m.topic(t, "changed", msgs)})
		// The changed message is consistent with its own entries: its
		// successor's chain no longer follows from it.
		only(t, rep, verify.KindChainBroken, changed.Subject, changed.Sequence+1)
	})

	t.Run("from archived heads", func(t *testing.T) {
		half := len(m.msgs) / 2
		topic := m.topic(t, "archived", m.msgs[:half])
		first, heads := m.verify(t, verify.Config{Topic: topic})
		if !first.Clean() {
			t.Fatalf("first half: %+v", first.Findings)
		}
		// The month goes on; the broker's retention then deletes the
		// verified half.
		m.produce(t, topic, m.msgs[half:])
		cl, err := kgo.NewClient(kgo.SeedBrokers(m.k.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var del kadm.Offsets
		del.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(half)})
		if _, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del); err != nil {
			t.Fatal(err)
		}
		// Without the heads the accounts' chains cannot be checked.
		bare, _ := m.verify(t, verify.Config{Topic: topic})
		if bare.Clean() || bare.Findings[0].Kind != verify.KindNoHead {
			t.Fatalf("without heads: %+v, want no_head findings", bare.Findings)
		}
		// From the heads: clean, and at the same heads as the whole month.
		second, heads2 := m.verify(t, verify.Config{Topic: topic, Heads: heads})
		if !second.Clean() || second.FromDigest != heads.Digest || second.Checked != int64(len(m.msgs)-half) {
			t.Fatalf("second half from the heads: %+v", second)
		}
		_, whole := m.verify(t, verify.Config{Topic: clean})
		if fmt.Sprint(heads2.Heads) != fmt.Sprint(whole.Heads) {
			t.Fatalf("heads after both halves:\n%v\nafter the whole month:\n%v", heads2.Heads, whole.Heads)
		}
		// A head changed in the archive breaks its account's next message.
		forged := *heads
		forged.Heads = append([]verify.Head{}, heads.Heads...)
		f, later := -1, message.Response{}
		for _, r := range m.msgs[half:] {
			later = decode(t, r)
			for j, h := range forged.Heads {
				if h.Tenant == later.Identity.TenantID && h.Subject == later.Subject {
					f = j
				}
			}
			if f >= 0 {
				break
			}
		}
		if f < 0 {
			t.Fatal("no account of the second half has a head after the first")
		}
		forged.Heads[f].ChainHash = strings.Repeat("0", 64)
		bad, _ := m.verify(t, verify.Config{Topic: topic, Heads: &forged})
		if bad.Clean() || bad.Findings[0].Kind != verify.KindChainBroken || bad.Findings[0].Subject != later.Subject {
			t.Fatalf("from a forged head: %+v", bad.Findings)
		}
		// Heads whose range the broker deleted past: a retention gap.
		early := *heads
		early.Offsets = []verify.Range{{Partition: 0, End: int64(half) - 1}}
		gap, _ := m.verify(t, verify.Config{Topic: topic, Heads: &early})
		if gap.Clean() || gap.Findings[0].Kind != verify.KindRetentionGap {
			t.Fatalf("heads older than the log start: %+v", gap.Findings)
		}
	})
}
