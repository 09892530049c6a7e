package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
)

var (
	sqlDeliveryLookup       = mustQuery("delivery_lookup.sql")
	sqlIdentityLookup       = mustQuery("identity_lookup.sql")
	sqlPeriodLookup         = mustQuery("period_lookup.sql")
	sqlAccountInsert        = mustQuery("account_insert.sql")
	sqlAccountLock          = mustQuery("account_lock.sql")
	sqlIdentityReserve      = mustQuery("identity_reserve.sql")
	sqlIdentityInsert       = mustQuery("identity_insert.sql")
	sqlLedgerEntryInsert    = mustQuery("ledger_entry_insert.sql")
	sqlAccountUpdate        = mustQuery("account_update.sql")
	sqlDeliveryInsert       = mustQuery("delivery_insert.sql")
	sqlOutboxInsert         = mustQuery("outbox_insert.sql")
	sqlDeadLetterInsert     = mustQuery("dead_letter_insert.sql")
	sqlConsumerOffsetUpsert = mustQuery("consumer_offset_upsert.sql")
	sqlConflictCaseOpen     = mustQuery("conflict_case_open.sql")
)

// decoded is an input record after decoding, before the transaction.
type decoded struct {
	in        *Input
	rec       fingerprint.Record
	err       *fingerprint.DecodeError // nil when rec is valid
	id        fingerprint.Identity
	canonical []byte
	fp        uint64
}

// Settle settles a batch of input records in one transaction and returns one
// result per input, in order. The results equal those of handling the
// records one at a time in order: a duplicate or a conflict inside the batch
// is caught too. group, when not empty, names the consumer group whose
// offsets the transaction records (the next offset per partition).
//
// Contention is retried here. A database outage returns an error wrapping
// ErrUnavailable (retry the same batch later: it never settles twice). Any
// other failure is a *BatchError.
func (s *Store) Settle(ctx context.Context, group string, inputs []Input) ([]Result, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	if len(inputs) > s.cfg.BatchRecordsMax {
		return nil, fmt.Errorf("settle: batch of %d records is more than the %d-record limit", len(inputs), s.cfg.BatchRecordsMax)
	}
	firstSeen := s.now()
	ds := make([]decoded, len(inputs))
	for i := range inputs {
		ds[i] = s.decode(&inputs[i])
	}
	backoff := time.Millisecond
	for attempt := 1; ; attempt++ {
		results, err := s.attempt(ctx, group, ds, attempt, firstSeen)
		if err == nil {
			return results, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch classify(err) {
		case ErrContention:
			if attempt >= s.cfg.ContentionRetriesMax {
				return nil, fmt.Errorf("settle batch of %d records: %w after %d attempts: %v", len(inputs), ErrContention, attempt, err)
			}
			// Jittered, capped backoff so racing batches fall out of step.
			sleep := backoff/2 + rand.N(backoff)
			backoff = min(backoff*2, 100*time.Millisecond)
			select {
			case <-time.After(sleep):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case ErrUnavailable:
			return nil, fmt.Errorf("settle batch of %d records: %w: %v", len(inputs), ErrUnavailable, err)
		default:
			return nil, &BatchError{Records: len(inputs), Err: err}
		}
	}
}

func (s *Store) decode(in *Input) decoded {
	d := decoded{in: in}
	if in.Exhausted != nil {
		return d
	}
	rec, err := s.dec.Decode(in.Value, in.Headers)
	if err != nil {
		var de *fingerprint.DecodeError
		if !errors.As(err, &de) {
			de = &fingerprint.DecodeError{Reason: fingerprint.ReasonInvalidJSON, Field: "record", Msg: err.Error()}
		}
		d.err = de
		return d
	}
	d.rec = rec
	d.id = rec.Identity()
	d.canonical = fingerprint.Canonical(&d.rec)
	d.fp = fingerprint.Sum(d.canonical)
	return d
}

// attempt runs one transaction attempt over the whole batch.
func (s *Store) attempt(ctx context.Context, group string, ds []decoded, attempt int, firstSeen time.Time) ([]Result, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	st, err := s.load(ctx, tx, ds)
	if err != nil {
		return nil, err
	}
	st.attempt = attempt
	st.firstSeen = firstSeen
	st.attemptStart = s.now()
	results := make([]Result, len(ds))
	for i := range ds {
		r, err := st.handle(ctx, tx, &ds[i])
		if err != nil {
			return nil, err
		}
		results[i] = r
	}
	if err := st.write(ctx, tx, group, ds); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return results, nil
}

// accountKey names an account.
type accountKey struct{ tenant, subject, currency string }

type account struct {
	id                      int64
	key                     accountKey
	balance, held           money.Dec
	balanceDelta, heldDelta money.Dec
	seqBefore, seq          int64
}

// identity is an identity known to the transaction: settled before, or
// claimed by an earlier record of this batch.
type identity struct {
	id           int64
	key          fingerprint.Identity
	fp           uint64
	version      int
	canonical    []byte
	outcome      Outcome
	reason       string
	response     []byte
	settlementID string
	accountID    int64
	rootID       int64
	isNew        bool
	d            *decoded
}

type entryRow struct {
	identityID, accountID int64
	tenant, bucket        string
	amount                money.Dec
}

type deliveryRow struct {
	in                 *Input
	tenant             string
	identityID, caseID int64
	outcome            Outcome
	reason, errText    string
}

type outboxRow struct {
	topic   string
	key     []byte
	value   []byte
	headers []byte
}

// txState is what one transaction attempt knows and will write.
type txState struct {
	s            *Store
	now          time.Time
	attempt      int
	firstSeen    time.Time
	attemptStart time.Time

	redelivered map[Coordinates]Result
	identities  map[fingerprint.Identity]*identity
	accounts    map[accountKey]*account
	closed      map[[2]string]bool
	ids         []int64

	newIdentities []*identity
	entries       []entryRow
	deliveries    []deliveryRow
	outbox        []outboxRow
	deadLetters   []deadLetterRow
	offsets       map[Coordinates]int64 // topic+partition (Offset 0) -> next offset
}

// touchesAccount reports whether the record's own (tenant, subject,
// currency) is an account it moves.
func touchesAccount(r *fingerprint.Record) bool {
	switch r.Kind {
	case fingerprint.KindUsage, fingerprint.KindGrant, fingerprint.KindHold, fingerprint.KindCorrection:
		return r.Currency != ""
	}
	return false
}

// load reads, in one round trip, everything the batch needs to decide its
// outcomes: earlier deliveries of its coordinates, its identities already
// settled, closed periods, and its accounts (created when new, then locked).
func (s *Store) load(ctx context.Context, tx pgx.Tx, ds []decoded) (*txState, error) {
	st := &txState{
		s:           s,
		redelivered: map[Coordinates]Result{},
		identities:  map[fingerprint.Identity]*identity{},
		accounts:    map[accountKey]*account{},
		closed:      map[[2]string]bool{},
		offsets:     map[Coordinates]int64{},
	}
	var (
		dTopics  []string
		dParts   []int32
		dOffsets []int64
		iT, iP   []string
		iR, iO   []string
		pT, pP   []string
		aT, aS   []string
		aC       []string
		seenID   = map[fingerprint.Identity]bool{}
		seenPer  = map[[2]string]bool{}
		seenAcc  = map[accountKey]bool{}
		valid    int
	)
	for i := range ds {
		d := &ds[i]
		dTopics = append(dTopics, d.in.Topic)
		dParts = append(dParts, d.in.Partition)
		dOffsets = append(dOffsets, d.in.Offset)
		if d.err != nil || d.in.Exhausted != nil {
			continue
		}
		valid++
		if !seenID[d.id] {
			seenID[d.id] = true
			iT, iP, iR, iO = append(iT, d.id.TenantID), append(iP, d.id.AccountPeriod), append(iR, d.id.RecordID), append(iO, string(d.id.Operation))
		}
		pk := [2]string{d.rec.TenantID, d.rec.AccountPeriod}
		if !seenPer[pk] {
			seenPer[pk] = true
			pT, pP = append(pT, pk[0]), append(pP, pk[1])
		}
		if touchesAccount(&d.rec) {
			ak := accountKey{d.rec.TenantID, d.rec.Subject, d.rec.Currency}
			if !seenAcc[ak] {
				seenAcc[ak] = true
				aT, aS, aC = append(aT, ak.tenant), append(aS, ak.subject), append(aC, ak.currency)
			}
		}
	}

	b := &pgx.Batch{}
	b.Queue(sqlDeliveryLookup, dTopics, dParts, dOffsets)
	b.Queue(sqlIdentityLookup, iT, iP, iR, iO)
	b.Queue(sqlPeriodLookup, pT, pP)
	b.Queue(sqlAccountInsert, aT, aS, aC)
	b.Queue(sqlAccountLock, aT, aS, aC)
	b.Queue(sqlIdentityReserve, len(ds))
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	rows, _ := br.Query()
	for rows.Next() {
		var (
			c             Coordinates
			outcome       string
			r             Result
			t, p, rid, op *string
			response      []byte
		)
		if err := rows.Scan(&c.Topic, &c.Partition, &c.Offset, &outcome, &r.Reason, &r.Error, &r.CaseID, &t, &p, &rid, &op, &response); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		r.Version, r.Source, r.Outcome, r.Redelivered = SchemaVersionOutput, c, Outcome(outcome), true
		if t != nil {
			r.Identity = &IdentityJSON{*t, *p, *rid, *op}
			r.Response = response
			r.Replayed = r.Outcome == OutcomeDuplicate
		}
		st.redelivered[c] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}

	rows, _ = br.Query()
	for rows.Next() {
		var (
			id      identity
			op, out string
			fp      int64
		)
		if err := rows.Scan(&id.id, &id.key.TenantID, &id.key.AccountPeriod, &id.key.RecordID, &op, &fp, &id.version,
			&id.canonical, &out, &id.reason, &id.response, &id.settlementID, &id.accountID); err != nil {
			return nil, fmt.Errorf("read identities: %w", err)
		}
		id.key.Operation, id.fp, id.outcome = fingerprint.Kind(op), uint64(fp), Outcome(out)
		st.identities[id.key] = &id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read identities: %w", err)
	}

	rows, _ = br.Query()
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, fmt.Errorf("read periods: %w", err)
		}
		st.closed[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read periods: %w", err)
	}

	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("create accounts: %w", err)
	}

	rows, _ = br.Query()
	for rows.Next() {
		var (
			a             account
			balance, held string
		)
		if err := rows.Scan(&a.id, &a.key.tenant, &a.key.subject, &a.key.currency, &balance, &held, &a.seq); err != nil {
			return nil, fmt.Errorf("lock accounts: %w", err)
		}
		var err error
		if a.balance, err = money.Parse(balance); err != nil {
			return nil, err
		}
		if a.held, err = money.Parse(held); err != nil {
			return nil, err
		}
		a.seqBefore = a.seq
		st.accounts[a.key] = &a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	if len(st.accounts) != len(aT) {
		return nil, fmt.Errorf("lock accounts: locked %d of %d", len(st.accounts), len(aT))
	}

	rows, _ = br.Query()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &st.now); err != nil {
			return nil, fmt.Errorf("reserve identity ids: %w", err)
		}
		st.ids = append(st.ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reserve identity ids: %w", err)
	}
	_ = valid
	return st, br.Close()
}

// handle decides the outcome of one input record against the state so far,
// as if the records before it in the batch had been settled one at a time.
func (st *txState) handle(ctx context.Context, tx pgx.Tx, d *decoded) (Result, error) {
	c := Coordinates{d.in.Topic, d.in.Partition, d.in.Offset}
	st.advanceOffset(c)
	if r, ok := st.redelivered[c]; ok {
		r.Timestamp, r.Key = d.in.Timestamp, d.in.Key
		return r, nil
	}
	res := Result{Version: SchemaVersionOutput, Source: c, Timestamp: d.in.Timestamp, Key: d.in.Key}
	switch {
	case d.in.Exhausted != nil:
		return st.deadLetter(d, res, ReasonTransientExhausted, "transient", d.in.Exhausted.Err), nil
	case d.err != nil:
		return st.deadLetter(d, res, d.err.Reason, "invalid_input", d.err.Error()), nil
	}
	idj := identityJSON(d.id)
	res.Identity = &idj

	if prior, ok := st.identities[d.id]; ok {
		return st.repeat(ctx, tx, d, prior, res)
	}
	resp, err := st.apply(ctx, tx, d)
	if err != nil {
		return res, err
	}
	res.Outcome, res.Reason, res.CaseID = resp.Outcome, resp.Reason, resp.CaseID
	res.Response = st.claim(d, resp)
	st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: st.identities[d.id].id,
		caseID: resp.CaseID, outcome: res.Outcome, reason: res.Reason})
	return res, nil
}

// repeat answers a record whose identity is already known: the stored
// response when the canonical payloads match (compared in the stored
// record's canonical version), a quarantine case when they do not.
func (st *txState) repeat(ctx context.Context, tx pgx.Tx, d *decoded, prior *identity, res Result) (Result, error) {
	incoming := d.canonical
	if prior.version != fingerprint.CanonicalVersion {
		var err error
		if incoming, err = fingerprint.CanonicalAt(prior.version, &d.rec); err != nil {
			return res, fmt.Errorf("%s: canonical version %d: %w", d.id, prior.version, err)
		}
	}
	same := string(incoming) == string(prior.canonical)
	if prior.version == fingerprint.CanonicalVersion && (d.fp == prior.fp) != same {
		// The hash is a filter; the bytes decide. Equal bytes with different
		// hashes would be a defect in Sum.
		panic(fmt.Sprintf("settle: %s: fingerprint %x vs %x disagrees with canonical bytes", d.id, d.fp, prior.fp))
	}
	if same {
		res.Outcome, res.Replayed, res.Response = OutcomeDuplicate, true, prior.response
		st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: prior.id, outcome: OutcomeDuplicate})
		return res, nil
	}
	caseID, err := st.openCase(ctx, tx, d, ReasonFingerprintMismatch, prior, "same identity, different payload")
	if err != nil {
		return res, err
	}
	res.Outcome, res.Reason, res.CaseID = OutcomeQuarantined, ReasonFingerprintMismatch, caseID
	st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: prior.id, caseID: caseID,
		outcome: OutcomeQuarantined, reason: ReasonFingerprintMismatch})
	return res, nil
}

// openCase opens (or joins) the conflict case of one record. prior is the
// stored identity it conflicts with, or nil for a rule-based quarantine.
func (st *txState) openCase(ctx context.Context, tx pgx.Tx, d *decoded, reason string, prior *identity, detail string) (int64, error) {
	var (
		priorID  int64
		stored   []byte
		diff     = []fingerprint.FieldDiff{}
		incoming = d.canonical
	)
	if prior != nil {
		priorID, stored = prior.id, prior.canonical
		if prior.version != fingerprint.CanonicalVersion {
			incoming, _ = fingerprint.CanonicalAt(prior.version, &d.rec)
		}
		var err error
		if diff, err = fingerprint.Diff(stored, incoming); err != nil {
			return 0, fmt.Errorf("%s: diff: %w", d.id, err)
		}
	}
	diffJSON, _ := json.Marshal(diff)
	var id int64
	err := tx.QueryRow(ctx, sqlConflictCaseOpen, d.id.TenantID, d.id.AccountPeriod, d.id.RecordID, string(d.id.Operation),
		reason, int64(d.fp), priorID, stored, incoming, diffJSON, detail, d.in.Topic, d.in.Partition, d.in.Offset).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errLostRace
	}
	if err != nil {
		return 0, fmt.Errorf("%s: open case: %w", d.id, err)
	}
	return id, nil
}

// claim records a new identity with its stored response and returns the
// response bytes.
func (st *txState) claim(d *decoded, resp *Response) []byte {
	body, err := json.Marshal(resp)
	if err != nil {
		panic(err) // a Response always marshals
	}
	id := &identity{
		id: st.ids[0], key: d.id, fp: d.fp, version: fingerprint.CanonicalVersion, canonical: d.canonical,
		outcome: resp.Outcome, reason: resp.Reason, response: body, settlementID: resp.SettlementID, isNew: true, d: d,
	}
	st.ids = st.ids[1:]
	if resp.Outcome == OutcomeSettled {
		a := st.accounts[accountKey{d.rec.TenantID, resp.Subject, resp.Currency}]
		id.accountID = a.id
		st.outbox = append(st.outbox, outboxRow{
			topic: st.s.cfg.SettlementsTopic,
			key:   []byte(a.key.tenant + "/" + a.key.subject + "/" + a.key.currency),
			value: body,
			headers: encodeHeaders([]fingerprint.Header{
				{Key: "settlement_id", Value: []byte(resp.SettlementID)},
				{Key: "tenant_id", Value: []byte(a.key.tenant)},
				{Key: "sequence", Value: strconv.AppendInt(nil, resp.Sequence, 10)},
				{Key: "kind", Value: []byte(resp.Kind)},
				{Key: "version", Value: []byte(strconv.Itoa(SchemaVersionOutput))},
			}),
		})
	}
	st.identities[d.id] = id
	st.newIdentities = append(st.newIdentities, id)
	return body
}

// deadLetter records an input record that cannot be settled.
func (st *txState) deadLetter(d *decoded, res Result, reason, class, msg string) Result {
	res.Outcome, res.Reason, res.Error = OutcomeDeadLettered, reason, msg
	st.deliveries = append(st.deliveries, deliveryRow{in: d.in, outcome: OutcomeDeadLettered, reason: reason, errText: msg})
	attempts := 1
	if d.in.Exhausted != nil {
		attempts = d.in.Exhausted.Attempts
	}
	dl := deadLetterRow{in: d.in, reason: reason, class: class, err: msg, attempts: attempts}
	st.deadLetters = append(st.deadLetters, dl)
	st.outbox = append(st.outbox, outboxRow{topic: st.s.cfg.DeadLetterTopic, key: d.in.Key, value: d.in.Value, headers: dl.outboxHeaders()})
	return res
}

func (st *txState) advanceOffset(c Coordinates) {
	k := Coordinates{Topic: c.Topic, Partition: c.Partition}
	if c.Offset+1 > st.offsets[k] {
		st.offsets[k] = c.Offset + 1
	}
}

// settlementID derives the settlement id from the identity, so that every
// redelivery and every environment names a settlement the same way.
func settlementID(id fingerprint.Identity) string {
	h := sha256.New()
	for _, s := range []string{id.TenantID, id.AccountPeriod, id.RecordID, string(id.Operation)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sortedAccounts returns the touched accounts in id order.
func (st *txState) sortedAccounts() []*account {
	as := make([]*account, 0, len(st.accounts))
	for _, a := range st.accounts {
		if a.seq != a.seqBefore {
			as = append(as, a)
		}
	}
	sort.Slice(as, func(i, j int) bool { return as[i].id < as[j].id })
	return as
}
