// Package canary proves exactly-once on a live deployment: on a schedule it
// sends through the real usage topic a few records of a reserved tenant
// (Tenant) that replay the delivery scenarios settle exists for — a
// duplicate in the same partition, a copy in another partition at the same
// moment, a producer's retry after a delay — plus a conflicting payload, a
// correction and a refund, then reads usage.results and settlements and
// checks that each ended as docs/CONTRACT.md says within a deadline.
//
// It is a Kafka client like any producer and reader: it never opens the
// database and never calls into the settling code, so what it sees is what
// every consumer of the topics sees. A crash before the acknowledgement is
// the one scenario it cannot induce without harming the service it
// watches; its report says so (CrashNote) and the fault tier stays that
// scenario's proof.
package canary

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/telemetry"
)

// Tenant is the reserved tenant of the canary's records. It is the one
// tenant whose identities may be pruned, and the places that total or
// queue a tenant's work leave it out unless asked for (IsCanary).
const Tenant = "settle-canary"

// Header marks every canary record (its value is the run's id), so that
// consumers settle does not own can drop them; usage.results repeats an
// input's headers on its result.
const Header = "settle_canary"

// IsCanary says whether tenant is the canary's.
func IsCanary(tenant string) bool { return tenant == Tenant }

// Subject is the account (subject, in USD) of a run at t: one a UTC day,
// canary-YYYYMMDD. A day's account is never written again once the day
// is over (but by a redelivery), so the canary's history can be pruned
// by whole accounts, each with its hash chain and sequence, and a pruned
// account's name never comes back on the settlements topic.
func Subject(t time.Time) string { return "canary-" + t.UTC().Format("20060102") }

// OtherSubject is the day's second account, of the conflicting payload's
// other copy.
func OtherSubject(t time.Time) string { return Subject(t) + "-other" }

// The scenarios, as metrics and reports name them.
const (
	ScenarioSamePartition  = "duplicate_same_partition"
	ScenarioOtherPartition = "copy_other_partition"
	ScenarioDelayedRetry   = "retry_after_delay"
	ScenarioConflict       = "conflicting_payload"
	ScenarioCorrection     = "correction"
	ScenarioRefund         = "refund"
)

// Scenarios lists them in the order a run sends them.
var Scenarios = []string{ScenarioSamePartition, ScenarioOtherPartition, ScenarioDelayedRetry, ScenarioConflict, ScenarioCorrection, ScenarioRefund}

// CaseReason is the reason a canary's conflict case is rejected with.
const CaseReason = "canary: a conflict sent on purpose"

// CrashNote is what every report says of the scenario it does not run.
const CrashNote = "crash before the acknowledgement: not induced on a live service (it would harm it); proven by the fault tier (e2e/faults) only"

// IdentitiesPerRun is how many identities one run stores: one each for the
// three copies' records and the conflict's, the corrected usage, its
// correction and its refund.
const IdentitiesPerRun = 7

// Config is what the canary sends to and reads from. The zero value of
// every field but Brokers is a documented default.
type Config struct {
	Brokers    []string
	ClientOpts []kgo.Opt // TLS, SASL
	// Topics: "" = usage, usage.results, settlements.
	UsageTopic, ResultsTopic, SettlementsTopic string
	// Deadline bounds one run from its first send to the last outcome it
	// waits for; 0 = 2 m.
	Deadline time.Duration
	// RetryDelay is how long after the first copy the producer's retry is
	// sent; 0 = 5 s.
	RetryDelay time.Duration
	// Grace is how long a run keeps reading after everything arrived, to
	// see a settlement published twice; 0 = 2 s.
	Grace time.Duration
	// Metrics, when set, get each scenario's runs, failures and seconds
	// from send to settlement, and the time of the last full pass.
	Metrics *telemetry.Metrics
	// Logger logs a failure with the records involved; nil = discard.
	Logger *slog.Logger
	// ResolveCase, when set, is called after each run for the conflict
	// case its conflicting payload opened, so the canary's cases resolve
	// themselves (the service rejects it); nil leaves it open.
	ResolveCase func(ctx context.Context, caseID int64) error
}

func (c *Config) defaults() {
	if c.UsageTopic == "" {
		c.UsageTopic = "usage"
	}
	if c.ResultsTopic == "" {
		c.ResultsTopic = "usage.results"
	}
	if c.SettlementsTopic == "" {
		c.SettlementsTopic = "settlements"
	}
	if c.Deadline <= 0 {
		c.Deadline = 2 * time.Minute
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 5 * time.Second
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Outcome is how one scenario of a run ended.
type Outcome struct {
	Scenario string  `json:"scenario"`
	OK       bool    `json:"ok"`
	Problem  string  `json:"problem,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"` // first send to its last settlement read
	// Records are the results and settlements read for it, one line each.
	Records []string `json:"records,omitempty"`
}

// Report is one run.
type Report struct {
	Run       string    `json:"run"`
	Period    string    `json:"period"`
	Outcomes  []Outcome `json:"outcomes"`
	Passed    bool      `json:"passed"`
	CrashNote string    `json:"crash_before_ack"`
	// Cases are the conflict cases the run's conflicting payload opened,
	// and what became of each (Config.ResolveCase).
	Cases []Case `json:"cases,omitempty"`
}

// Case is a conflict case a run opened on purpose.
type Case struct {
	ID int64 `json:"id"`
	// Resolved: rejected through Config.ResolveCase. False with Error
	// empty: no ResolveCase was given, and the case is left open.
	Resolved bool   `json:"resolved"`
	Error    string `json:"error,omitempty"`
}

// Failed names the scenarios that failed.
func (r *Report) Failed() []string {
	var out []string
	for _, o := range r.Outcomes {
		if !o.OK {
			out = append(out, o.Scenario)
		}
	}
	return out
}

// Canary runs the scenarios; it is safe for one goroutine at a time.
type Canary struct {
	cfg          Config
	failsInARow  atomic.Int64
	lastPassUnix atomic.Int64
}

// New returns a canary; it connects on each run.
func New(cfg Config) (*Canary, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("canary: no brokers")
	}
	cfg.defaults()
	return &Canary{cfg: cfg}, nil
}

// FailuresInARow is how many runs in a row failed (0 after a pass).
func (c *Canary) FailuresInARow() int64 { return c.failsInARow.Load() }

// Loop runs the canary every interval until ctx ends; each run's failure
// is logged and counted (FailuresInARow), never returned.
func (c *Canary) Loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if rep, err := c.Run(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("canary: run failed", "err", err)
		} else if rep != nil && !rep.Passed {
			c.cfg.Logger.Error("canary: scenarios failed", "run", rep.Run, "failed", strings.Join(rep.Failed(), ","))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sent is one record a run sent.
type sent struct {
	scenario string
	id       string // record_id
	op       string // operation
	at       time.Time
}

// Run sends one run's records and checks what became of them. The error
// is for a run that could not be made (the brokers, the context); a
// scenario that ended otherwise than the contract says is in the report.
func (c *Canary) Run(ctx context.Context) (*Report, error) {
	rep, err := c.run(ctx)
	if err != nil {
		c.failsInARow.Add(1)
		for _, s := range Scenarios {
			c.cfg.Metrics.Canary(ctx, s, false, 0)
		}
		return nil, err
	}
	for _, o := range rep.Outcomes {
		c.cfg.Metrics.Canary(ctx, o.Scenario, o.OK, o.Seconds)
		if !o.OK {
			c.cfg.Logger.Error("canary: scenario failed", "run", rep.Run, "scenario", o.Scenario, "problem", o.Problem, "records", o.Records)
		}
	}
	if rep.Passed {
		c.failsInARow.Store(0)
		c.lastPassUnix.Store(time.Now().Unix())
		c.cfg.Metrics.CanaryPassed(ctx, time.Now())
	} else {
		c.failsInARow.Add(1)
	}
	return rep, nil
}

func (c *Canary) run(ctx context.Context) (*Report, error) {
	cfg := c.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	now := time.Now().UTC()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	run := now.Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd[:])
	rep := &Report{Run: run, Period: now.Format("2006-01"), CrashNote: CrashNote}

	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks())}, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("canary: kafka client: %w", err)
	}
	defer cl.Close()
	// Out through the service's one way to Kafka, one attempt a record: a
	// canary record the broker does not take fails the run, which is what
	// it should report.
	out := outlet.New(cl, outlet.Config{Attempts: 1})
	send := func(rs ...*kgo.Record) error {
		s, err := out.Produce(ctx, rs...)
		for i := range rs {
			err = errors.Join(err, s.Outcome(i))
		}
		return err
	}
	adm := kadm.NewClient(cl)
	// Read from what the topics hold now: what follows is this run's.
	ends, err := adm.ListEndOffsets(ctx, cfg.ResultsTopic, cfg.SettlementsTopic, cfg.UsageTopic)
	if err != nil {
		return nil, fmt.Errorf("canary: list end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("canary: list end offsets: %w", err)
	}
	partitions := int32(len(ends[cfg.UsageTopic]))
	if partitions == 0 {
		return nil, fmt.Errorf("canary: topic %s not found", cfg.UsageTopic)
	}
	from := map[string]map[int32]kgo.Offset{}
	for _, t := range []string{cfg.ResultsTopic, cfg.SettlementsTopic} {
		from[t] = map[int32]kgo.Offset{}
		for p, o := range ends[t] {
			from[t][p] = kgo.NewOffset().At(o.Offset)
		}
	}
	rd, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumePartitions(from)}, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("canary: kafka client: %w", err)
	}
	defer rd.Close()

	// The account's records share a partition, as producers key them; the
	// copy of the other-partition scenario goes to the next one. The
	// account is the day's (Subject), so that a retention of the canary's
	// history removes whole accounts with their chains.
	subject := Subject(now)
	key := Tenant + "/" + subject
	h := fnv.New32a()
	h.Write([]byte(key))
	home := int32(h.Sum32() % uint32(partitions))
	other := (home + 1) % partitions
	rec := func(id, kind, amount string, extra ...string) []byte {
		fields := []string{`"tenant_id":"` + Tenant + `"`, `"account_period":"` + rep.Period + `"`, `"record_id":"` + id + `"`,
			`"kind":"` + kind + `"`, `"subject":"` + subject + `"`, `"currency":"USD"`, `"occurred_at":"` + now.Format(time.RFC3339Nano) + `"`}
		if amount != "" {
			fields = append(fields, `"amount":"`+amount+`"`)
		}
		fields = append(fields, extra...)
		return []byte("{" + strings.Join(fields, ",") + "}")
	}
	usage := func(id, amount string) []byte {
		return rec(id, "usage", amount, `"meter":"canary"`, `"quantity":"1"`, `"unit":"run"`, `"finalization_version":1`)
	}
	mk := func(p int32, v []byte) *kgo.Record {
		return &kgo.Record{Topic: cfg.UsageTopic, Partition: p, Key: []byte(key), Value: v,
			Headers: []kgo.RecordHeader{{Key: Header, Value: []byte(run)}}}
	}
	id := func(s string) string { return run + "-" + s }
	var sends []sent
	produce := func(scenario, recordID, op string, rs ...*kgo.Record) error {
		sends = append(sends, sent{scenario: scenario, id: recordID, op: op, at: time.Now()})
		if err := send(rs...); err != nil {
			return fmt.Errorf("canary: produce %s: %w", scenario, err)
		}
		return nil
	}
	type step struct {
		scenario, id, op string
		recs             []*kgo.Record
	}
	steps := []step{
		{ScenarioSamePartition, id("same"), "usage", []*kgo.Record{mk(home, usage(id("same"), "0.01")), mk(home, usage(id("same"), "0.01"))}},
		{ScenarioDelayedRetry, id("retry"), "usage", []*kgo.Record{mk(home, usage(id("retry"), "0.01"))}},
		{ScenarioCorrection, id("charged"), "usage", []*kgo.Record{mk(home, usage(id("charged"), "0.01"))}},
		{ScenarioCorrection, id("correction"), "correction", []*kgo.Record{mk(home, rec(id("correction"), "correction", "0.02",
			`"meter":"canary"`, `"quantity":"2"`, `"unit":"run"`, `"finalization_version":2`, `"corrects":"`+id("charged")+`"`))}},
		{ScenarioRefund, id("charged"), "refund", []*kgo.Record{mk(home, rec(id("charged"), "refund", ""))}},
	}
	if partitions > 1 {
		// Both copies in one produce request: the same moment.
		steps = append(steps, step{ScenarioOtherPartition, id("copy"), "usage", []*kgo.Record{mk(home, usage(id("copy"), "0.01")), mk(other, usage(id("copy"), "0.01"))}})
	}
	// The conflicting payload names another subject, as a producer that
	// reused a record id would: the two copies are on two accounts and,
	// with two partitions, settled at the same moment by two transactions
	// that share no account lock — only the identity's unique key decides
	// which one settles (the other is quarantined).
	conflict := mk(home, usage(id("conflict"), "0.01"))
	subject = OtherSubject(now)
	steps = append(steps, step{ScenarioConflict, id("conflict"), "usage", []*kgo.Record{conflict, mk(other, usage(id("conflict"), "0.01"))}})
	subject = Subject(now)
	for _, s := range steps {
		if err := produce(s.scenario, s.id, s.op, s.recs...); err != nil {
			return nil, err
		}
	}
	retryAt := time.Now().Add(cfg.RetryDelay)

	w := newWatch(run, cfg)
	retried := false
	var doneAt time.Time
	for {
		if !retried && time.Now().After(retryAt) {
			// The producer's retry after its timeout: the same record again.
			if err := send(mk(home, usage(id("retry"), "0.01"))); err != nil {
				return nil, fmt.Errorf("canary: produce %s retry: %w", ScenarioDelayedRetry, err)
			}
			retried = true
		}
		if retried && doneAt.IsZero() && w.complete(partitions > 1) {
			doneAt = time.Now()
		}
		if !doneAt.IsZero() && time.Since(doneAt) >= cfg.Grace {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := rd.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			break // the deadline: what has not arrived fails
		}
		fs.EachRecord(w.add)
	}
	rep.Outcomes = w.judge(sends, partitions > 1, cfg.Deadline)
	for _, rs := range w.results {
		for _, r := range rs {
			if r.Outcome != message.OutcomeQuarantined || r.CaseID == 0 {
				continue
			}
			c := Case{ID: r.CaseID}
			if cfg.ResolveCase != nil {
				if err := cfg.ResolveCase(context.WithoutCancel(ctx), r.CaseID); err != nil {
					c.Error = err.Error()
					cfg.Logger.Error("canary: could not resolve its conflict case", "run", run, "case", r.CaseID, "err", err)
				} else {
					c.Resolved = true
				}
			}
			rep.Cases = append(rep.Cases, c)
		}
	}
	rep.Passed = true
	for _, o := range rep.Outcomes {
		rep.Passed = rep.Passed && o.OK
	}
	return rep, nil
}

// watch collects what the topics say of one run's records.
type watch struct {
	run         string
	cfg         Config
	results     map[[2]string][]message.Result   // by record_id, operation
	settlements map[[2]string][]message.Response // by record_id, operation
	settledAt   map[[2]string]time.Time
}

func newWatch(run string, cfg Config) *watch {
	return &watch{run: run, cfg: cfg, results: map[[2]string][]message.Result{}, settlements: map[[2]string][]message.Response{},
		settledAt: map[[2]string]time.Time{}}
}

var tenantJSON = []byte(`"tenant_id":"` + Tenant + `"`)

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func (w *watch) add(r *kgo.Record) {
	switch r.Topic {
	case w.cfg.ResultsTopic:
		// A result names its identity, whose tenant marks the canary's
		// (decoded only when its bytes name the tenant at all).
		if !bytes.Contains(r.Value, tenantJSON) {
			return
		}
		var res message.Result
		if json.Unmarshal(r.Value, &res) != nil || res.Identity == nil || !strings.HasPrefix(res.Identity.RecordID, w.run+"-") {
			return
		}
		k := [2]string{res.Identity.RecordID, res.Identity.Operation}
		w.results[k] = append(w.results[k], res)
	case w.cfg.SettlementsTopic:
		if v, _ := header(r, "tenant_id"); v != Tenant {
			return
		}
		var m message.Response
		if json.Unmarshal(r.Value, &m) != nil || !strings.HasPrefix(m.Identity.RecordID, w.run+"-") {
			return
		}
		k := [2]string{m.Identity.RecordID, m.Identity.Operation}
		w.settlements[k] = append(w.settlements[k], m)
		w.settledAt[k] = time.Now()
	}
}

// expected is what each identity of a run must end with: its results'
// outcomes (sorted) and one settlement.
func (w *watch) expected(withOther bool) map[[2]string][]string {
	id := func(s string) string { return w.run + "-" + s }
	e := map[[2]string][]string{
		{id("same"), "usage"}:            {"duplicate", "settled"},
		{id("retry"), "usage"}:           {"duplicate", "settled"},
		{id("conflict"), "usage"}:        {"quarantined", "settled"},
		{id("charged"), "usage"}:         {"settled"},
		{id("correction"), "correction"}: {"settled"},
		{id("charged"), "refund"}:        {"settled"},
	}
	if withOther {
		e[[2]string{id("copy"), "usage"}] = []string{"duplicate", "settled"}
	}
	return e
}

func (w *watch) complete(withOther bool) bool {
	for k, outcomes := range w.expected(withOther) {
		if len(w.results[k]) < len(outcomes) || len(w.settlements[k]) < 1 {
			return false
		}
	}
	return true
}

// judge checks each scenario against the contract.
func (w *watch) judge(sends []sent, withOther bool, deadline time.Duration) []Outcome {
	exp := w.expected(withOther)
	first := map[string]time.Time{}
	keys := map[string][][2]string{}
	for _, s := range sends {
		if _, ok := first[s.scenario]; !ok {
			first[s.scenario] = s.at
		}
		keys[s.scenario] = append(keys[s.scenario], [2]string{s.id, s.op})
	}
	var out []Outcome
	for _, sc := range Scenarios {
		if sc == ScenarioOtherPartition && !withOther {
			out = append(out, Outcome{Scenario: sc, OK: true, Problem: "skipped: the usage topic has one partition"})
			continue
		}
		o := Outcome{Scenario: sc, OK: true}
		var last time.Time
		for _, k := range keys[sc] {
			o.Records = append(o.Records, w.describe(k)...)
			if p := w.check(k, exp[k], deadline); p != "" && o.Problem == "" {
				o.OK, o.Problem = false, p
			}
			if t := w.settledAt[k]; t.After(last) {
				last = t
			}
		}
		if o.OK && !last.IsZero() {
			o.Seconds = last.Sub(first[sc]).Seconds()
		}
		out = append(out, o)
	}
	return out
}

// check is what is wrong with one identity's results and settlements, or
// "".
func (w *watch) check(k [2]string, want []string, deadline time.Duration) string {
	name := k[1] + " " + k[0]
	rs := w.results[k]
	var got []string
	var stored []byte
	for _, r := range rs {
		got = append(got, string(r.Outcome))
		if r.Outcome == message.OutcomeSettled {
			stored = r.Response
		}
	}
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Sprintf("%s: results %v, want %v within %s", name, got, want, deadline)
	}
	for _, r := range rs {
		switch r.Outcome {
		case message.OutcomeDuplicate:
			// The duplicate is answered from the stored response, unchanged.
			if !r.Replayed || string(r.Response) != string(stored) {
				return fmt.Sprintf("%s: the duplicate's answer is not the stored response (replayed %v): %s, stored %s", name, r.Replayed, r.Response, stored)
			}
		case message.OutcomeQuarantined:
			if r.Reason != message.ReasonFingerprintMismatch || r.CaseID == 0 {
				return fmt.Sprintf("%s: quarantined %q case %d, want fingerprint_mismatch with a case", name, r.Reason, r.CaseID)
			}
		}
	}
	// One effect: every settlement message of the identity is the same
	// settlement (the relay may repeat one message, never make a second).
	ss := w.settlements[k]
	if len(ss) == 0 {
		return fmt.Sprintf("%s: no settlement within %s", name, deadline)
	}
	for _, s := range ss[1:] {
		if s.SettlementID != ss[0].SettlementID || s.Sequence != ss[0].Sequence {
			return fmt.Sprintf("%s: settled twice: settlements %s (sequence %d) and %s (sequence %d)", name, ss[0].SettlementID, ss[0].Sequence, s.SettlementID, s.Sequence)
		}
	}
	return ""
}

func (w *watch) describe(k [2]string) []string {
	var out []string
	for _, r := range w.results[k] {
		out = append(out, fmt.Sprintf("result %s %s: %s %s replayed=%v", k[1], k[0], r.Outcome, r.Reason, r.Replayed))
	}
	for _, s := range w.settlements[k] {
		out = append(out, fmt.Sprintf("settlement %s %s: %s sequence %d entries %v", k[1], k[0], s.SettlementID, s.Sequence, s.Entries))
	}
	return out
}
