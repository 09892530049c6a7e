package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/settlehq/settle/corrections"
	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// decoded is an input record after decoding, before the transaction.
type decoded struct {
	in        *Input
	rec       record.Record
	err       *record.DecodeError // nil when rec is valid
	id        record.Identity
	canonical []byte
	fp        uint64
}

// Settle settles a batch of input records in one transaction and returns one
// result per input, in order. The results equal those of handling the
// records one at a time in order: a duplicate or a conflict inside the batch
// is caught too. group, when not empty, names the consumer group whose
// offsets the transaction records (the next offset per partition).
//
// A record that waits for its target gets the result `waiting`; its final
// result is written to the results topic through the outbox when it is
// applied, in its target's transaction.
//
// Contention is retried here. A database outage returns an error wrapping
// ErrUnavailable (retry the same batch later: it never settles twice). Any
// other failure is a *BatchError.
func (s *Store) Settle(ctx context.Context, group string, inputs []Input) ([]message.Result, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	if len(inputs) > s.cfg.BatchRecordsMax {
		return nil, fmt.Errorf("settle: batch of %d records is more than the %d-record limit", len(inputs), s.cfg.BatchRecordsMax)
	}
	firstSeen := s.now()
	ds := make([]decoded, len(inputs))
	for i := range inputs {
		in := &inputs[i]
		if in.Decoded == nil && in.Exhausted == nil {
			return nil, fmt.Errorf("settle: input %d (%s/%d@%d) is not decoded: decode inputs first (Store.Decode)", i, in.Topic, in.Partition, in.Offset)
		}
		ds[i] = decodedOf(in, in.Decoded)
	}
	var results []message.Result
	locks := periodLocks{}
	err := s.withRetries(ctx, len(inputs), func(attempt int) error {
		var err error
		results, err = s.attempt(ctx, group, ds, attempt, firstSeen, locks)
		return err
	})
	return results, err
}

// contentionBackoff is the wait between attempts of a batch that lost a
// race: short (the race is over in a transaction's time), and jittered by
// half either way so racing batches fall out of step.
var contentionBackoff = backoff.Policy{Min: time.Millisecond, Max: 100 * time.Millisecond,
	Jitter: backoff.Jitter{Below: 0.5, Above: 0.5}}

// withRetries runs one transaction attempt after another while they lose
// races, with jittered capped backoff, and classifies the final error.
func (s *Store) withRetries(ctx context.Context, records int, attempt func(n int) error) error {
	b := backoff.New(contentionBackoff)
	for n := 1; ; n++ {
		err := attempt(n)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errWidenLocks) {
			// Not a race lost: the next attempt holds more locks, and the
			// set only grows, so this ends.
			n--
			continue
		}
		switch c := dberr.Classify(err); {
		case errors.Is(c, dberr.ErrContention):
			if n >= s.cfg.ContentionRetriesMax {
				return fmt.Errorf("settle batch of %d records: %w after %d attempts: %w", records, dberr.ErrContention, n, err)
			}
			if !b.Wait(ctx, nil) {
				return ctx.Err()
			}
		case errors.Is(c, dberr.ErrUnavailable):
			return fmt.Errorf("settle batch of %d records: %w: %w", records, dberr.ErrUnavailable, err)
		default:
			return &BatchError{Records: records, Err: err}
		}
	}
}

// Decode decodes, with the store's decoder (its Config.Decoder), every
// input that is not decoded yet, so that it can be settled. The consumer
// calls it as a poll's records become inputs; tools and tests that build
// inputs by hand call it before Settle.
func (s *Store) Decode(ins []Input) []Input {
	for i := range ins {
		if ins[i].Decoded == nil && ins[i].Exhausted == nil {
			p := s.dec.Prepare(ins[i].Value, ins[i].Headers)
			ins[i].Decoded = &p
		}
	}
	return ins
}

// decodedOf is an input with its decoding, as the transaction works on it.
func decodedOf(in *Input, p *record.Decoded) decoded {
	d := decoded{in: in}
	if in.Exhausted != nil || p == nil {
		return d
	}
	d.rec, d.err, d.id, d.canonical, d.fp = p.Record, p.Err, p.Identity, p.Canonical, p.Sum
	return d
}

// attempt runs one transaction attempt over the whole batch.
func (s *Store) attempt(ctx context.Context, group string, ds []decoded, attempt int, firstSeen time.Time, locks periodLocks) ([]message.Result, error) {
	results := make([]message.Result, len(ds))
	err := s.transact(ctx, attempt, firstSeen, locks, group, true, func(st *txState) (bool, error) {
		if err := st.load(ctx, ds, nil); err != nil {
			return false, err
		}
		for i := range ds {
			r, err := st.handle(ctx, &ds[i])
			if err != nil {
				return false, err
			}
			results[i] = r
		}
		caseIDs, err := st.openPendingCases(ctx)
		if err != nil {
			return false, err
		}
		for i := range ds {
			if id, ok := caseIDs[ds[i].in]; ok {
				results[i].CaseID = id
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// transact runs one transaction attempt, the one frame of every settling
// transaction (a batch, a sweep, a resolution): act loads and decides on
// st; unless it returns false (nothing to write), the period locks its
// decisions asked for are checked, its rows written, group's offsets with
// them, and the transaction committed. A batch's commit passes the crash
// points before_commit and after_commit (internal/crashpoint); a sweep's
// or a resolution's does not, so that a point's hits count batches.
func (s *Store) transact(ctx context.Context, attempt int, firstSeen time.Time, locks periodLocks, group string,
	batch bool, act func(st *txState) (bool, error)) (err error) {
	tx, err := db.Begin(ctx, s.pool)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	st := s.newTxState(tx, attempt, firstSeen, locks)
	st.group = group
	defer func() { s.accounts.forgetStale(st, err, time.Now()) }()
	write, err := act(st)
	if err == nil {
		err = st.stale
	}
	if err != nil || !write {
		return err
	}
	if err = st.checkLocks(); err != nil {
		return err
	}
	p, err := st.write(ctx, group)
	if err != nil {
		return err
	}
	if batch {
		crashpoint.Hit("before_commit")
	}
	if err = s.commit(ctx, tx, st, p); err != nil {
		return err
	}
	if batch {
		crashpoint.Hit("after_commit")
	}
	s.accounts.learn(st, time.Now())
	s.offsets.learn(group, st.offsets)
	return nil
}

// accountKey names an account.
type accountKey struct{ tenant, subject, currency string }

// recKey names a record by (tenant, period, record_id), whatever its kind:
// the key targets are looked up by.
type recKey struct{ tenant, period, record string }

type account struct {
	id             int64
	key            accountKey
	balance, held  money.Dec
	seqBefore, seq int64
	head           []byte // chain head: hash of the newest ledger row
	// entryID is the id of the account's newest ledger row: its next row's
	// is entryID + 1, so that two writers from the same state collide on
	// the primary key (migration 0017).
	entryID        int64
	entryBefore    int64 // entryID as read or kept
	expiredChecked bool
	// kept: the state came from this process's accountCache, neither
	// locked nor read; answered: a decision used it without writing a row
	// to the account (the transaction then checks it is still current).
	kept, answered bool
}

// identity is an identity known to the transaction: settled before, or
// claimed by an earlier record of this batch.
type identity struct {
	id                int64
	key               record.Identity
	fp                uint64
	version           int
	canonical         []byte
	outcome           message.Outcome
	reason            string
	response          []byte
	settlementID      string
	subject, currency string
	accountID         int64
	rootID, targetID  int64
	// source: the coordinates of the input record that claimed it (of
	// its waiting row's, when it waited first; none when no input record
	// did): a redelivery of them is answered with the identity's result.
	source message.Coordinates
	isNew  bool
	d      *decoded
}

// chain is a chain locked by the transaction.
type chain struct {
	rootID              int64
	rootSubject         string
	rootCurrency        string
	rootSettlement      string
	a                   *account
	c                   corrections.Chain
	refundID, reclaimID int64
	refundSettlement    string
	rev                 int32
	isNew, dirty        bool
}

// hold is a hold locked by the transaction.
type hold struct {
	identityID        int64
	key               record.Identity
	settlementID      string
	tenant            string
	accountID         int64
	a                 *account
	amount, remaining money.Dec
	expiresAt         *time.Time
	status            string
	closedBy          int64
	rev               int32
	isNew, dirty      bool
}

// waitingOp is an operation waiting for its target.
type waitingOp struct {
	id        int64 // 0 until written
	d         *decoded
	target    recKey
	fp        uint64
	canonical []byte
	response  []byte
	status    string
	caseID    int64
	isNew     bool
	dirty     bool
}

// entryRow is a ledger row and the state of its account after it (its
// settlement's sequence, balance and held), which the account's newest row
// is the record of (migration 0016).
type entryRow struct {
	id, identityID, accountID int64
	tenant, bucket            string
	amount                    money.Dec
	hash                      []byte
	seq                       int64
	balance, held             money.Dec
}

type deliveryRow struct {
	in                 *Input
	tenant             string
	identityID, caseID int64
	outcome            message.Outcome
	reason             string
}

// outboxRow is a message to publish: its value, or (a settlement) the
// identity whose stored response is the value, with the sequence and kind
// of its headers (settle/outbox assembles the rest).
type outboxRow struct {
	topic    string
	key      []byte
	value    []byte
	headers  []byte
	identity *identity // a settlement's; nil for other messages
	sequence int64
	kind     string
	tenant   string // '' for a dead letter: a record that is not settled belongs to no tenant
}

// txState is what one transaction attempt knows and will write.
type txState struct {
	// accountsByKey: some account was found by its key, not by an id
	// this process knew; a commit teaches the Store its id.
	accountsByKey bool
	s             *Store
	tx            *db.Tx
	group         string // the consumer group whose offsets it commits; "" = none
	now           time.Time
	attempt       int
	firstSeen     time.Time
	attemptStart  time.Time

	// stale: a decision met a kept account state that cannot be current
	// (errKeptStale); the attempt ends with it instead of writing.
	stale error

	redelivered     map[message.Coordinates]message.Result
	identities      map[record.Identity]*identity
	byRecord        map[recKey][]*identity
	accounts        map[accountKey]*account
	accountsByID    map[int64]*account
	chains          map[int64]*chain
	holds           map[int64]*hold
	waitingByID     map[record.Identity]*waitingOp
	waitingByTarget map[recKey][]*waitingOp
	closed          map[[2]string]bool
	ids             []int64

	// locks are the period locks this attempt holds (taken by load); need
	// what its decisions asked for. carried is the set the next attempt
	// starts from when need is not covered.
	locks, need, carried periodLocks

	newIdentities []*identity
	entries       []entryRow
	deliveries    []deliveryRow
	outbox        []outboxRow
	outboxWritten *db.OutboxSettlementsInsertBatchResults // the queued insert of the settlements, read by the commit
	deadLetters   []deadLetterRow
	waitingList   []*waitingOp
	closedCases   []int64
	// pendingCases are the batch's fingerprint-mismatch cases, opened
	// together once it is decided (openPendingCases); caseDeliveries the
	// delivery rows and results that wait for their ids.
	pendingCases   []caseToOpen
	pendingByKey   map[caseKey]int
	caseDeliveries []caseDelivery
	// resolution is the case resolution a resolving transaction writes
	// (Resolve).
	resolution *db.CaseResolutionInsertParams
	offsets    map[message.Coordinates]int64 // topic+partition (Offset 0) -> next offset
}

// newTxState starts a transaction attempt's state; carried is the set of
// period locks the caller keeps across its attempts (see periodLocks).
func (s *Store) newTxState(tx *db.Tx, attempt int, firstSeen time.Time, carried periodLocks) *txState {
	return &txState{
		carried:         carried,
		locks:           maps.Clone(carried),
		need:            periodLocks{},
		s:               s,
		tx:              tx,
		attempt:         attempt,
		firstSeen:       firstSeen,
		attemptStart:    s.now(),
		redelivered:     map[message.Coordinates]message.Result{},
		identities:      map[record.Identity]*identity{},
		byRecord:        map[recKey][]*identity{},
		accounts:        map[accountKey]*account{},
		accountsByID:    map[int64]*account{},
		chains:          map[int64]*chain{},
		holds:           map[int64]*hold{},
		waitingByID:     map[record.Identity]*waitingOp{},
		waitingByTarget: map[recKey][]*waitingOp{},
		closed:          map[[2]string]bool{},
		offsets:         map[message.Coordinates]int64{},
	}
}

// presize makes room in st's maps for the n records a load brings in
// before it fills them: their growth showed in the service's profile.
func (st *txState) presize(n int) {
	if len(st.identities) == 0 {
		st.identities = make(map[record.Identity]*identity, n)
		st.byRecord = make(map[recKey][]*identity, n)
	}
	if len(st.accounts) == 0 {
		st.accounts = make(map[accountKey]*account, n)
	}
	if len(st.need) == 0 {
		st.need = make(periodLocks, n)
	}
	if len(st.locks) == 0 {
		st.locks = make(periodLocks, n)
	}
}

// nextID hands out a reserved identity id, reserving more when the batch
// needs more than it reserved up front (waiting operations applied, holds
// expired on the way).
func (st *txState) nextID(ctx context.Context) (int64, error) {
	if len(st.ids) == 0 {
		p := db.NewPipeline(st.tx)
		rows, err := db.Rows(db.New(p).IdentityReserve(ctx, []int32{64}).Query)
		if serr := p.Send(ctx); err == nil {
			err = serr
		}
		if err != nil {
			return 0, fmt.Errorf("reserve identity ids: %w", err)
		}
		for _, row := range rows {
			st.ids = append(st.ids, *row.ID) // the clock stays the one load read
		}
	}
	id := st.ids[0]
	st.ids = st.ids[1:]
	return id, nil
}

func (st *txState) advanceOffset(c message.Coordinates) {
	k := message.Coordinates{Topic: c.Topic, Partition: c.Partition}
	if c.Offset+1 > st.offsets[k] {
		st.offsets[k] = c.Offset + 1
	}
}

// settlementID derives the settlement id from the identity, so that every
// redelivery and every environment names a settlement the same way.
func settlementID(id record.Identity) string {
	h := sha256.New()
	for _, s := range []string{id.TenantID, id.AccountPeriod, id.RecordID, string(id.Operation)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
