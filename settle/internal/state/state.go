// Package state is what one settling transaction attempt knows and will
// write, and how it reads and writes it.
//
// State.Load takes the period locks a batch names and reads, in pipelined
// round trips, everything its decisions look at: earlier deliveries of its
// coordinates, its identities settled or waiting, the targets its
// operations name, closed periods, and the accounts, chains and holds it
// touches (locked, or taken from the store's kept states, AccountCache).
// The decisions (package settle) read and change these rows in memory and
// stage new ones: identities, ledger entries, deliveries, waiting rows, dead
// letters, outbox messages. State.CheckLocks and State.Write then send
// them in one pipeline with the consumer group's next offsets, and the
// caller commits it.
//
// It decides nothing: whether a record settles, repeats, waits, is refused
// or quarantined is package settle's. Shared is what the attempts of one
// store share between transactions.
package state

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/settlehq/settle/corrections"
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// Item is an input record after decoding, before the transaction.
type Item struct {
	In        *message.Input
	Rec       record.Record
	Err       *record.DecodeError // nil when rec is valid
	ID        record.Identity
	Canonical []byte
	FP        uint64
}

// ItemOf is an input with its decoding, as the transaction works on it.
func ItemOf(in *message.Input, p *fingerprint.Decoded) Item {
	d := Item{In: in}
	if in.Undecoded() || p == nil {
		return d
	}
	d.Rec, d.Err, d.ID, d.Canonical, d.FP = p.Record, p.Err, p.Identity, p.Canonical, p.Sum
	return d
}

// AccountKey names an account.
type AccountKey struct{ Tenant, Subject, Currency string }

// RecKey names a record by (tenant, period, record_id), whatever its kind:
// the key targets are looked up by.
type RecKey struct{ Tenant, Period, Record string }

// Account is an account the transaction locked, read, or took from the
// store's kept states, and what its decisions have moved it to.
type Account struct {
	ID             int64
	Key            AccountKey
	Balance, Held  money.Dec
	seqBefore, Seq int64
	Head           []byte // chain head: hash of the newest ledger row
	// entryID is the id of the account's newest ledger row: its next row's
	// is entryID + 1, so that two writers from the same state collide on
	// the primary key (migration 0017).
	EntryID        int64
	entryBefore    int64 // entryID as read or kept
	ExpiredChecked bool
	// kept: the state came from this process's AccountCache, neither
	// locked nor read; answered: a decision used it without writing a row
	// to the account (the transaction then checks it is still current).
	Kept, Answered bool
}

// IdentityRow is an identity known to the transaction: settled before, or
// claimed by an earlier record of this batch.
type IdentityRow struct {
	ID                int64
	Key               record.Identity
	FP                uint64
	Version           int
	Canonical         []byte
	Outcome           message.Outcome
	Reason            string
	Response          []byte
	SettlementID      string
	Subject, Currency string
	AccountID         int64
	RootID, TargetID  int64
	// source: the coordinates of the input record that claimed it (of
	// its waiting row's, when it waited first; none when no input record
	// did): a redelivery of them is answered with the identity's result.
	Source message.Coordinates
	IsNew  bool
	Item   *Item
}

// Chain is a chain locked by the transaction.
type Chain struct {
	RootID              int64
	RootSubject         string
	RootCurrency        string
	RootSettlement      string
	Account             *Account
	Rules               corrections.Chain
	RefundID, ReclaimID int64
	RefundSettlement    string
	rev                 int32
	IsNew, Dirty        bool
}

// Hold is a hold locked by the transaction.
type Hold struct {
	IdentityID        int64
	Key               record.Identity
	SettlementID      string
	Tenant            string
	AccountID         int64
	Account           *Account
	Amount, Remaining money.Dec
	ExpiresAt         *time.Time
	Status            string
	ClosedBy          int64
	rev               int32
	IsNew, Dirty      bool
}

// Waiting is an operation waiting for its target.
type Waiting struct {
	id        int64 // 0 until written
	Item      *Item
	Target    RecKey
	FP        uint64
	Canonical []byte
	Response  []byte
	Status    string
	CaseID    int64
	IsNew     bool
	Dirty     bool
}

// EntryRow is a ledger row and the state of its account after it (its
// settlement's sequence, balance and held), which the account's newest row
// is the record of (migration 0016).
type EntryRow struct {
	ID, IdentityID, AccountID int64
	Tenant, Bucket            string
	Amount                    money.Dec
	Hash                      []byte
	Seq                       int64
	Balance, Held             money.Dec
}

// DeliveryRow is a delivery of an input record that no other row records
// (a repeat under other coordinates, a delivery joining a case).
type DeliveryRow struct {
	In                 *message.Input
	Tenant             string
	IdentityID, CaseID int64
	Outcome            message.Outcome
	Reason             string
}

// OutboxRow is a message to publish: its value, or (a settlement) the
// identity whose stored response is the value, with the sequence and kind
// of its headers (relay/outbox assembles the rest).
type OutboxRow struct {
	Topic    string
	Key      []byte
	Value    []byte
	Headers  []byte
	Identity *IdentityRow // a settlement's; nil for other messages
	Sequence int64
	Kind     string
	Tenant   string // '' for a dead letter: a record that is not settled belongs to no tenant
}

// State is what one transaction attempt knows and will write.
type State struct {
	// accountsByKey: some account was found by its key, not by an id
	// this process knew; a commit teaches the Store its id.
	accountsByKey bool
	Shared        *Shared
	Tx            *pgq.Tx
	Group         string // the consumer group whose offsets it commits; "" = none
	Now           time.Time
	attempt       int
	firstSeen     time.Time
	AttemptStart  time.Time

	// Stale: a decision met a kept account state that cannot be current
	// (ErrKeptStale); the attempt ends with it instead of writing.
	Stale error

	Redelivered     map[message.Coordinates]message.Result
	Identities      map[record.Identity]*IdentityRow
	ByRecord        map[RecKey][]*IdentityRow
	Accounts        map[AccountKey]*Account
	AccountsByID    map[int64]*Account
	Chains          map[int64]*Chain
	Holds           map[int64]*Hold
	WaitingByID     map[record.Identity]*Waiting
	WaitingByTarget map[RecKey][]*Waiting
	Closed          map[[2]string]bool
	ids             []int64

	// locks are the period locks this attempt holds (taken by Load); Need
	// what its decisions asked for. carried is the set the next attempt
	// starts from when Need is not covered.
	locks, Need, carried PeriodLocks

	NewIdentities []*IdentityRow
	Entries       []EntryRow
	Deliveries    []DeliveryRow
	Outbox        []OutboxRow
	OutboxWritten *db.OutboxSettlementsInsertBatchResults // the queued insert of the settlements, read by the commit
	DeadLetters   []DeadLetterRow
	WaitingList   []*Waiting
	ClosedCases   []int64
	// Resolution is the case resolution a resolving transaction writes
	// (Resolve).
	Resolution *db.CaseResolutionInsertParams
	Offsets    map[message.Coordinates]int64 // topic+partition (Offset 0) -> next offset
}

// presize makes room in st's maps for the n records a load brings in
// before it fills them: their growth showed in the service's profile.
func (st *State) presize(n int) {
	if len(st.Identities) == 0 {
		st.Identities = make(map[record.Identity]*IdentityRow, n)
		st.ByRecord = make(map[RecKey][]*IdentityRow, n)
	}
	if len(st.Accounts) == 0 {
		st.Accounts = make(map[AccountKey]*Account, n)
	}
	if len(st.Need) == 0 {
		st.Need = make(PeriodLocks, n)
	}
	if len(st.locks) == 0 {
		st.locks = make(PeriodLocks, n)
	}
}

// NextID hands out a reserved identity id, reserving more when the batch
// needs more than it reserved up front (waiting operations applied, holds
// expired on the way).
func (st *State) NextID(ctx context.Context) (int64, error) {
	if len(st.ids) == 0 {
		p := pgq.NewPipeline(st.Tx)
		rows, err := pgq.Rows(db.New(p).IdentityReserve(ctx, []int32{1}).Query)
		if serr := p.Send(ctx); err == nil {
			err = serr
		}
		if err != nil {
			return 0, fmt.Errorf("reserve identity ids: %w", err)
		}
		for _, row := range rows {
			st.ids = db.Reserved(st.ids, []int64{row.V}, db.IDBlock) // the clock stays the one load read
		}
	}
	id := st.ids[0]
	st.ids = st.ids[1:]
	return id, nil
}

// AdvanceOffset moves the next offset the transaction records for c's
// partition past c.
func (st *State) AdvanceOffset(c message.Coordinates) {
	st.AdvanceOffsetTo(c, c.Offset+1)
}

// AdvanceOffsetTo moves the next offset the transaction records for c's
// partition to next, unless it is there already.
func (st *State) AdvanceOffsetTo(c message.Coordinates, next int64) {
	k := message.Coordinates{Topic: c.Topic, Partition: c.Partition}
	if next > st.Offsets[k] {
		st.Offsets[k] = next
	}
}

// CaseID is the conflict case a quarantined identity's response names
// (0 for any other).
func (id *IdentityRow) CaseID() int64 {
	if id.Outcome != message.OutcomeQuarantined {
		return 0
	}
	var c struct {
		CaseID int64 `json:"case_id"`
	}
	_ = json.Unmarshal(id.Response, &c)
	return c.CaseID
}

// Shared is what the transactions of one store share: the accounts, offsets
// and settlements their commits left it knowing, and its decoder.
type Shared struct {
	Accounts         AccountCache
	Offsets          OffsetCache
	Written          WrittenCache
	Probed           atomic.Int64 // coordinates probed for earlier deliveries (tests)
	Decoder          *record.Decoder
	SettlementsTopic string
}

// New starts a transaction attempt's state over tx; carried is the set of
// period locks the caller keeps across its attempts (see PeriodLocks), now
// the time the attempt starts.
func New(shared *Shared, tx *pgq.Tx, attempt int, firstSeen, now time.Time, carried PeriodLocks) *State {
	return &State{
		carried:         carried,
		locks:           maps.Clone(carried),
		Need:            PeriodLocks{},
		Shared:          shared,
		Tx:              tx,
		attempt:         attempt,
		firstSeen:       firstSeen,
		AttemptStart:    now,
		Redelivered:     map[message.Coordinates]message.Result{},
		Identities:      map[record.Identity]*IdentityRow{},
		ByRecord:        map[RecKey][]*IdentityRow{},
		Accounts:        map[AccountKey]*Account{},
		AccountsByID:    map[int64]*Account{},
		Chains:          map[int64]*Chain{},
		Holds:           map[int64]*Hold{},
		WaitingByID:     map[record.Identity]*Waiting{},
		WaitingByTarget: map[RecKey][]*Waiting{},
		Closed:          map[[2]string]bool{},
		Offsets:         map[message.Coordinates]int64{},
	}
}

// ErrKeptStale ends an attempt whose decisions met a kept account state that
// another writer has moved past (AccountCache): contention, retried with
// the account read fresh.
var ErrKeptStale = fmt.Errorf("a kept account state is behind the database: %w", dberr.ErrContention)

// ErrLostRace is returned inside a transaction attempt when it finds that a
// concurrent transaction got somewhere first (a case id it could not read
// back); the attempt is rolled back and retried.
var ErrLostRace = fmt.Errorf("lost a race with a concurrent transaction: %w", dberr.ErrContention)

// ResolvedStatus is the status a case resolved by decision ends in.
func ResolvedStatus(decision string) string {
	if decision == "accept" {
		return "accepted"
	}
	return "rejected"
}
