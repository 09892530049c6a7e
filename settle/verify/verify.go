// Package verify checks the settlements topic on its own, as finance reads
// it: no database, only read access to the topic. It follows every
// account's chain message by message (the sequence gapless, each
// chain_hash the step of message.ChainHash from the one before over the
// message's own entries), holds a settlement_id seen twice to the same
// bytes, totals the settlements per tenant, period and currency, and ends
// with the heads of every account and a digest of them that finance
// archives: the next run starts from those heads, so a range stays
// verifiable after the broker's retention dropped its start.
//
// Its memory is bounded: per account the last sequence, hash and message
// digest, plus a window of the most recent settlements (WindowMax) against
// which a repeated settlement_id is compared. It never writes to the
// broker and never opens a database.
package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/internal/kafkaread"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle/message"
)

// Config is what one verification reads. The zero value of every field but
// Brokers is a documented default.
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// Topic is the settlements topic; "" = "settlements".
	Topic string
	// Tenant limits the check to one tenant's accounts; "" = every tenant.
	Tenant string
	// IncludeCanary totals the canary tenant (canary.Tenant) too; its
	// chains are verified either way. Asking for it as Tenant includes it.
	IncludeCanary bool
	// From and To bound the periods (YYYY-MM, inclusive) whose settlements
	// are totalled; "" = unbounded. An account's chain runs across
	// periods, so every message of a checked account is verified whatever
	// its period.
	From, To string
	// Heads, when set, are the archived heads of an earlier verified range
	// of the same topic and tenant: reading starts at their offsets and
	// every account continues its chain from its head.
	Heads *Heads
	// WindowMax is how many of the most recent settlements are kept to
	// compare a repeated settlement_id with; 0 = 100,000 (about 10 MB). The
	// relay repeats a message only shortly after it first published it.
	WindowMax int
	// ClientOpts are added to the Kafka client's options (TLS, SASL).
	ClientOpts []kgo.Opt
	// Progress, when set, is called about every ProgressEvery while the
	// topic is read.
	Progress func(Progress)
	// ProgressEvery: 0 = 5 s.
	ProgressEvery time.Duration
}

// Progress is how far a long read got.
type Progress struct {
	Read, Total int64 // messages read, and to read
}

// Validate says what cannot work.
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("no brokers: give the Kafka seed brokers")
	}
	for _, p := range []string{c.From, c.To} {
		if p == "" {
			continue
		}
		if _, err := time.Parse("2006-01", p); err != nil || len(p) != 7 {
			return fmt.Errorf("period %q: want YYYY-MM", p)
		}
	}
	if c.From != "" && c.To != "" && c.To < c.From {
		return fmt.Errorf("period range %s..%s ends before it starts", c.From, c.To)
	}
	if h := c.Heads; h != nil {
		if h.Version != headsVersion {
			return fmt.Errorf("heads file version %d: this settle reads version %d", h.Version, headsVersion)
		}
		if h.Topic != c.topic() || h.Tenant != c.Tenant {
			return fmt.Errorf("heads are of topic %q tenant %q, not topic %q tenant %q: verify the same topic and tenant they were written for",
				h.Topic, h.Tenant, c.topic(), c.Tenant)
		}
	}
	return nil
}

func (c *Config) topic() string {
	if c.Topic == "" {
		return "settlements"
	}
	return c.Topic
}

// Finding kinds.
const (
	// KindSequenceGap: an account's sequence skips numbers (a message
	// removed), or its first message read is not sequence 1 though the
	// topic was read from its very beginning.
	KindSequenceGap = "sequence_gap"
	// KindChainBroken: a message's chain_hash is not the chain step from
	// the one before over its entries (this message or the one before was
	// changed).
	KindChainBroken = "chain_broken"
	// KindSettlementDiffers: a settlement_id seen twice with other bytes.
	KindSettlementDiffers = "settlement_differs"
	// KindSequenceRepeated: a sequence at or below the account's last one
	// whose settlement is not among the window's (another settlement
	// reusing it, or a repeat older than WindowMax).
	KindSequenceRepeated = "sequence_repeated"
	// KindNoHead: an account's first message read is not sequence 1 and
	// no archived head precedes it: the topic's start is gone (retention)
	// and its chain cannot be checked.
	KindNoHead = "no_head"
	// KindRetentionGap: the broker no longer holds the offsets between
	// the archived heads and its log start: those messages were never
	// verified.
	KindRetentionGap = "retention_gap"
	// KindMalformed: a message that is not a settlement this verifier can
	// read.
	KindMalformed = "malformed"
)

// Finding is one thing that does not hold.
type Finding struct {
	Kind         string `json:"kind"`
	Tenant       string `json:"tenant,omitempty"`
	Subject      string `json:"subject,omitempty"`
	Currency     string `json:"currency,omitempty"`
	Sequence     int64  `json:"sequence,omitempty"`
	SettlementID string `json:"settlement_id,omitempty"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	Detail       string `json:"detail"`
}

// Total is what the settlements of one tenant, period and currency moved.
type Total struct {
	Tenant      string `json:"tenant"`
	Period      string `json:"period"`
	Currency    string `json:"currency"`
	Settlements int64  `json:"settlements"`
	Balance     string `json:"balance"` // sum of the balance entries
	Held        string `json:"held"`    // sum of the held entries
}

// Range is the offsets of one partition that were read: [Start, End).
type Range struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// Report is the outcome of one verification.
type Report struct {
	Topic      string    `json:"topic"`
	Tenant     string    `json:"tenant,omitempty"`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	Ranges     []Range   `json:"ranges"`
	Messages   int64     `json:"messages"`    // messages read (every tenant's)
	Checked    int64     `json:"checked"`     // messages of the checked tenants
	Repeats    int64     `json:"repeats"`     // repeated settlements, identical
	Accounts   int       `json:"accounts"`    // accounts with a head
	FromDigest string    `json:"from_digest"` // the archived digest it started from; "" = the topic's start
	Digest     string    `json:"digest"`      // of the heads at the end of the range (Heads.Digest)
	Totals     []Total   `json:"totals"`
	Findings   []Finding `json:"findings"`
}

// Clean says that nothing was found.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

// headsVersion is the version of the heads file's format.
const headsVersion = 1

// Heads are an account chain's state at the end of a verified range: what
// the next range continues from. Finance archives the file; its Digest is
// the verified range's digest.
type Heads struct {
	Version int     `json:"version"`
	Topic   string  `json:"topic"`
	Tenant  string  `json:"tenant,omitempty"`
	Digest  string  `json:"digest"`
	Offsets []Range `json:"offsets"` // per partition: End is where the next range starts
	Heads   []Head  `json:"heads"`
}

// Head is one account's last verified settlement.
type Head struct {
	Tenant    string `json:"tenant"`
	Subject   string `json:"subject"`
	Currency  string `json:"currency"`
	Sequence  int64  `json:"sequence"`
	ChainHash string `json:"chain_hash"`
}

type accountKey struct{ tenant, subject, currency string }

// account is the whole per-account state: bounded by the number of
// accounts, not of messages.
type account struct {
	seq    int64
	hash   []byte
	digest [sha256.Size]byte // of the last message's bytes
}

type totalKey struct{ tenant, period, currency string }

type total struct {
	n             int64
	balance, held money.Dec
}

// seen is one settlement of the window.
type seen struct {
	id     string
	digest [sha256.Size]byte
}

// window remembers the most recent settlements, oldest out first.
type window struct {
	max   int
	ring  []seen
	next  int
	byID  map[string][sha256.Size]byte
	count map[string]int // entries of the ring per id (an id may repeat)
}

func newWindow(max int) *window {
	return &window{max: max, byID: map[string][sha256.Size]byte{}, count: map[string]int{}}
}

func (w *window) lookup(id string) ([sha256.Size]byte, bool) {
	d, ok := w.byID[id]
	return d, ok
}

func (w *window) add(id string, d [sha256.Size]byte) {
	if len(w.ring) < w.max {
		w.ring = append(w.ring, seen{id, d})
	} else {
		old := w.ring[w.next]
		if w.count[old.id]--; w.count[old.id] == 0 {
			delete(w.count, old.id)
			delete(w.byID, old.id)
		}
		w.ring[w.next] = seen{id, d}
		w.next = (w.next + 1) % w.max
	}
	w.count[id]++
	if _, ok := w.byID[id]; !ok {
		w.byID[id] = d
	}
}

// verifier is one run's state.
type verifier struct {
	cfg      Config
	accounts map[accountKey]*account
	totals   map[totalKey]*total
	win      *window
	report   *Report
	// fromStart: partitions read from offset 0 with no heads, where an
	// account's first message must be sequence 1.
	fromStart map[int32]bool
}

// Run reads the range and verifies it. The error is for what kept it from
// reading (the broker, the context); what it found is in the report. The
// heads are those at the end of the range, to archive.
func Run(ctx context.Context, cfg Config) (*Report, *Heads, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if cfg.WindowMax <= 0 {
		cfg.WindowMax = 100_000
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	v := &verifier{cfg: cfg, accounts: map[accountKey]*account{}, totals: map[totalKey]*total{},
		win: newWindow(cfg.WindowMax), fromStart: map[int32]bool{},
		report: &Report{Topic: cfg.topic(), Tenant: cfg.Tenant, From: cfg.From, To: cfg.To, Findings: []Finding{}}}
	if h := cfg.Heads; h != nil {
		v.report.FromDigest = h.Digest
		for _, a := range h.Heads {
			hash, err := hex.DecodeString(a.ChainHash)
			if err != nil || len(hash) != sha256.Size {
				return nil, nil, fmt.Errorf("heads: account %s/%s/%s: chain_hash %q is not a SHA-256 in hex", a.Tenant, a.Subject, a.Currency, a.ChainHash)
			}
			v.accounts[accountKey{a.Tenant, a.Subject, a.Currency}] = &account{seq: a.Sequence, hash: hash}
		}
	}
	if err := v.read(ctx); err != nil {
		return nil, nil, err
	}
	heads := v.heads()
	v.report.Digest, v.report.Accounts = heads.Digest, len(heads.Heads)
	v.report.Totals = v.sortedTotals()
	return v.report, heads, nil
}

// read reads every partition from its start (or the heads' offsets) to
// the end offsets listed when it begins (kafkaread, the one reader of a
// topic to its end).
func (v *verifier) read(ctx context.Context) error {
	topic := v.cfg.topic()
	from := map[int32]int64{}
	if v.cfg.Heads != nil {
		for _, r := range v.cfg.Heads.Offsets {
			from[r.Partition] = r.End
		}
	}
	var total int64
	listed := func(o kafkaread.Offsets) {
		for p, end := range o.Ends {
			start := o.From[p]
			if at, ok := from[p]; ok && at < o.Starts[p] {
				v.find(Finding{Kind: KindRetentionGap, Partition: p, Offset: at,
					Detail: fmt.Sprintf("offsets %d..%d were deleted by retention before they were verified: the accounts they held show gaps", at, o.Starts[p]-1)})
			} else if !ok && v.cfg.Heads == nil && start == 0 {
				v.fromStart[p] = true
			}
			v.report.Ranges = append(v.report.Ranges, Range{Partition: p, Start: start, End: end})
			total += max(end-start, 0)
		}
		sort.Slice(v.report.Ranges, func(i, j int) bool { return v.report.Ranges[i].Partition < v.report.Ranges[j].Partition })
	}
	last := time.Now()
	_, err := kafkaread.Reader{From: from, Listed: listed}.ToEnd(ctx, v.cfg.Brokers, v.cfg.ClientOpts, topic, func(r *kgo.Record) {
		v.report.Messages++
		v.message(r)
		if v.cfg.Progress != nil && time.Since(last) >= v.cfg.ProgressEvery {
			last = time.Now()
			v.cfg.Progress(Progress{Read: v.report.Messages, Total: total})
		}
	})
	if errors.Is(err, kafkaread.ErrNoTopic) || errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w (is the topic's name right?)", err)
	}
	return err
}

func (v *verifier) find(f Finding) { v.report.Findings = append(v.report.Findings, f) }

// message verifies one message of the topic, in its partition's order.
func (v *verifier) message(r *kgo.Record) {
	if v.cfg.Tenant != "" {
		for _, h := range r.Headers {
			if h.Key == "tenant_id" && string(h.Value) != v.cfg.Tenant {
				return // another tenant's, known without decoding it
			}
		}
	}
	var m message.Response
	if err := json.Unmarshal(r.Value, &m); err != nil {
		v.find(Finding{Kind: KindMalformed, Partition: r.Partition, Offset: r.Offset, Detail: fmt.Sprintf("not a settlement: %v", err)})
		return
	}
	if v.cfg.Tenant != "" && m.Identity.TenantID != v.cfg.Tenant {
		return
	}
	v.report.Checked++
	at := Finding{Tenant: m.Identity.TenantID, Subject: m.Subject, Currency: m.Currency, Sequence: m.Sequence,
		SettlementID: m.SettlementID, Partition: r.Partition, Offset: r.Offset}
	if m.Version != message.SchemaVersionOutput {
		at.Kind, at.Detail = KindMalformed, fmt.Sprintf("version %d: this settle reads version %d (upgrade settle)", m.Version, message.SchemaVersionOutput)
		v.find(at)
		return
	}
	if m.SettlementID == "" || m.Sequence <= 0 || len(m.Entries) == 0 || m.Identity.TenantID == "" || m.Currency == "" {
		at.Kind, at.Detail = KindMalformed, "a settlement names its settlement_id, tenant, currency, sequence and entries"
		v.find(at)
		return
	}
	hash, err := hex.DecodeString(m.ChainHash)
	if err != nil || len(hash) != sha256.Size {
		at.Kind, at.Detail = KindMalformed, fmt.Sprintf("chain_hash %q is not a SHA-256 in hex", m.ChainHash)
		v.find(at)
		return
	}
	digest := sha256.Sum256(r.Value)
	key := accountKey{m.Identity.TenantID, m.Subject, m.Currency}
	a := v.accounts[key]

	// A settlement_id seen before: the relay published it again (after a
	// crash before its acknowledgement was recorded), byte for byte.
	if d, ok := v.win.lookup(m.SettlementID); ok {
		if d != digest {
			at.Kind, at.Detail = KindSettlementDiffers, "settlement_id seen before with other content"
			v.find(at)
			return
		}
		v.report.Repeats++
		return
	}
	switch {
	case a != nil && m.Sequence <= a.seq:
		if m.Sequence == a.seq && digest == a.digest {
			v.report.Repeats++
			return
		}
		at.Kind, at.Detail = KindSequenceRepeated, fmt.Sprintf("sequence %d again after %d, by a settlement not among the last %d read: another settlement reusing it, or a repeat older than the window (raise --window)",
			m.Sequence, a.seq, v.cfg.WindowMax)
		v.find(at)
		return
	case a == nil && m.Sequence == 1, a != nil && m.Sequence == a.seq+1:
		var prev []byte
		if a != nil {
			prev = a.hash
		}
		if want, err := step(prev, &m); err != nil {
			at.Kind, at.Detail = KindMalformed, err.Error()
			v.find(at)
			return
		} else if !bytes.Equal(want, hash) {
			at.Kind, at.Detail = KindChainBroken, fmt.Sprintf("chain_hash %x does not follow from sequence %d and this message's entries (%x): this message or the one before it was changed", hash, m.Sequence-1, want)
			v.find(at)
		}
	case a == nil:
		at.Kind = KindNoHead
		at.Detail = fmt.Sprintf("the account's first message read is sequence %d and no archived head precedes it: its chain cannot be checked (start from the heads of the range before: --from-heads)", m.Sequence)
		if v.fromStart[r.Partition] {
			at.Kind, at.Detail = KindSequenceGap, fmt.Sprintf("the account's first message is sequence %d: sequences 1..%d are missing", m.Sequence, m.Sequence-1)
		}
		v.find(at)
	default:
		at.Kind, at.Detail = KindSequenceGap, fmt.Sprintf("sequence %d follows %d: sequences %d..%d are missing", m.Sequence, a.seq, a.seq+1, m.Sequence-1)
		v.find(at)
	}
	// The message becomes the account's head, checked or not: one finding
	// per break, and what follows is checked against it.
	if a == nil {
		a = &account{}
		v.accounts[key] = a
	}
	a.seq, a.hash, a.digest = m.Sequence, hash, digest
	v.win.add(m.SettlementID, digest)
	v.count(&m)
}

// step is the account's chain head after m, from prev: message.ChainHash
// over each entry, in order, with its amount normalised as the ledger row
// stores it.
func step(prev []byte, m *message.Response) ([]byte, error) {
	h := prev
	for _, e := range m.Entries {
		amt, err := money.Parse(e.Amount)
		if err != nil {
			return nil, fmt.Errorf("entry amount %q: %w", e.Amount, err)
		}
		h = message.ChainHash(h, m.Identity.TenantID, m.Subject, m.Currency, m.SettlementID, e.Bucket, amt.String())
	}
	return h, nil
}

// count adds m to its tenant, period and currency's total when its period
// is in range.
func (v *verifier) count(m *message.Response) {
	p := m.Identity.AccountPeriod
	if (v.cfg.From != "" && p < v.cfg.From) || (v.cfg.To != "" && p > v.cfg.To) {
		return
	}
	if canary.IsCanary(m.Identity.TenantID) && !v.cfg.IncludeCanary && v.cfg.Tenant != canary.Tenant {
		return // its records prove the pipeline; they are nobody's money
	}
	k := totalKey{m.Identity.TenantID, p, m.Currency}
	t := v.totals[k]
	if t == nil {
		t = &total{}
		v.totals[k] = t
	}
	t.n++
	for _, e := range m.Entries {
		amt, _ := money.Parse(e.Amount) // parsed by step already
		switch e.Bucket {
		case "balance":
			t.balance = t.balance.Add(amt)
		case "held":
			t.held = t.held.Add(amt)
		}
	}
}

func (v *verifier) sortedTotals() []Total {
	out := make([]Total, 0, len(v.totals))
	for k, t := range v.totals {
		out = append(out, Total{Tenant: k.tenant, Period: k.period, Currency: k.currency, Settlements: t.n,
			Balance: t.balance.String(), Held: t.held.String()})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Period != b.Period {
			return a.Period < b.Period
		}
		return a.Currency < b.Currency
	})
	return out
}

// heads are the accounts' heads at the end of the range, sorted, and their
// digest: SHA-256 over the digest started from, the topic, the tenant, each
// partition's end offset and each account's key, sequence and head, each
// length-prefixed. Every head commits to its whole chain, so the digest
// commits to every entry verified up to it.
func (v *verifier) heads() *Heads {
	h := &Heads{Version: headsVersion, Topic: v.cfg.topic(), Tenant: v.cfg.Tenant, Offsets: []Range{}, Heads: make([]Head, 0, len(v.accounts))}
	prevEnd := map[int32]int64{}
	if v.cfg.Heads != nil {
		for _, r := range v.cfg.Heads.Offsets {
			prevEnd[r.Partition] = r.End
		}
	}
	for _, r := range v.report.Ranges {
		h.Offsets = append(h.Offsets, r)
		delete(prevEnd, r.Partition)
	}
	for p, end := range prevEnd { // a partition no longer listed keeps its offset
		h.Offsets = append(h.Offsets, Range{Partition: p, Start: end, End: end})
	}
	sort.Slice(h.Offsets, func(i, j int) bool { return h.Offsets[i].Partition < h.Offsets[j].Partition })
	for k, a := range v.accounts {
		h.Heads = append(h.Heads, Head{Tenant: k.tenant, Subject: k.subject, Currency: k.currency, Sequence: a.seq, ChainHash: hex.EncodeToString(a.hash)})
	}
	sort.Slice(h.Heads, func(i, j int) bool {
		a, b := h.Heads[i], h.Heads[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Currency < b.Currency
	})
	d := sha256.New()
	field := func(s string) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		d.Write(n[:])
		d.Write([]byte(s))
	}
	field("settle-verify-heads-v1")
	field(v.report.FromDigest)
	field(h.Topic)
	field(h.Tenant)
	for _, r := range h.Offsets {
		field(strconv.Itoa(int(r.Partition)))
		field(strconv.FormatInt(r.End, 10))
	}
	for _, a := range h.Heads {
		field(a.Tenant)
		field(a.Subject)
		field(a.Currency)
		field(strconv.FormatInt(a.Sequence, 10))
		field(a.ChainHash)
	}
	h.Digest = hex.EncodeToString(d.Sum(nil))
	return h
}
