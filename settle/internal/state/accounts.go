package state

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle/dberr"
)

// AccountCache is what this process knows of accounts between its
// transactions, safe for concurrent use (typed maps: sync.Map hashes the
// three-string key through an interface, which showed in the service's
// profile).
//
// ids maps an account's key to its id, for up to AccountIDsMax accounts a
// committed transaction of this process touched. An account's key and id
// never change and settle never deletes one, so a batch locks known
// accounts by id and skips creating them; one it no longer knows is found
// by its key again, as on its first use.
//
// kept holds, for up to keptStatesMax accounts, the state the last
// committed transaction of this process that touched the account left:
// balance, held, sequence, chain head and the id of its newest ledger row.
// A batch that finds an account's state here neither locks nor reads it,
// and appends to it. That is safe without the lock because an account's
// rows are one gapless line of ids (migration 0017): a row written from a
// state another process has moved past collides with a row already there,
// the transaction fails with a unique violation, and its next attempt
// reads the account fresh (forgetStale). What no key fences the
// transaction checks before it commits, with primary-key probes
// (account_kept.sql): that each kept state's newest row is still there (a
// database restored or emptied under the process has lost it: then
// everything known is forgotten), and that a state an answer used without
// writing a row to the account (a hold refused for want of funds, a
// release of nothing) is still the newest. In a
// deployment where one process settles each account (the consumer: one
// partition's accounts per lane) the lock and the read are gone for good;
// where several write one account (the HTTP edge behind a balancer, a
// rebalance), a collision drops every kept state the failed attempt used
// (the error names no account), so that the next attempt reads them fresh;
// those the fresh read finds moved since they were kept go on the
// contended list, whose accounts are locked and read fresh for
// contendedFor. The others are kept again.
type AccountCache struct {
	Mu        sync.RWMutex
	IDs       map[AccountKey]int64
	Kept      map[int64]Account
	Contended map[int64]time.Time

	// suspect holds, for each state dropped by a failed attempt, the id of
	// the newest ledger row it knew: the fresh read that follows tells
	// whether another writer moved the account (learn).
	suspect map[int64]int64
}

// keptStatesMax bounds the states kept (a few hundred bytes each); past it
// an arbitrary part is dropped, to be read again when next used.
const keptStatesMax = 1 << 17

// AccountIDsMax bounds the account ids known by key (IDs), and with
// keptStatesMax the whole cache: the accounts a tenant can name are as many
// as it has records, and without a bound every account ever touched stayed
// in memory (a few hundred bytes each). Past it an arbitrary eighth is dropped
// with the kept states of those accounts, so that what is kept stays
// reachable; a dropped account costs one lookup by key when next used.
const AccountIDsMax = 1 << 17

// dropOver deletes an arbitrary part of m once it holds more than max
// entries, leaving seven eighths of max: amortised over the inserts that
// filled it, a few deletes per insert. Map iteration order is random, so
// what is dropped is a random sample, not the oldest.
func dropOver[K comparable, V any](m map[K]V, max int, dropped func(K, V)) {
	if len(m) <= max {
		return
	}
	n := len(m) - max*7/8
	for k, v := range m {
		if n == 0 {
			break
		}
		delete(m, k)
		if dropped != nil {
			dropped(k, v)
		}
		n--
	}
}

// contendedFor is how long an account whose kept state another writer
// moved past is read fresh, under its lock, instead of kept.
const contendedFor = 10 * time.Second

func (c *AccountCache) get(k AccountKey) (int64, bool) {
	c.Mu.RLock()
	id, ok := c.IDs[k]
	c.Mu.RUnlock()
	return id, ok
}

// state returns a copy of the kept state of account id.
func (c *AccountCache) state(id int64) (Account, bool) {
	c.Mu.RLock()
	a, ok := c.Kept[id]
	c.Mu.RUnlock()
	return a, ok
}

// Learn records the accounts of a committed transaction: their ids and,
// unless contended, the states it read or wrote.
func (c *AccountCache) Learn(st *State, now time.Time) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if st.accountsByKey {
		if c.IDs == nil {
			c.IDs = map[AccountKey]int64{}
		}
		for k, a := range st.Accounts {
			c.IDs[k] = a.ID
		}
	}
	if c.Kept == nil {
		c.Kept = map[int64]Account{}
	}
	for id, a := range st.AccountsByID {
		if was, ok := c.suspect[id]; ok && !a.Kept {
			delete(c.suspect, id)
			if a.entryBefore != was { // moved by another writer since it was kept
				if c.Contended == nil {
					c.Contended = map[int64]time.Time{}
				}
				c.Contended[id] = now
			}
		}
		switch {
		case a.Kept && a.EntryID == a.entryBefore:
			continue // kept and left as it was: already here, or dropped as stale since
		case a.EntryID == 0:
			continue // no row to fence its next one: read it fresh
		}
		if t, ok := c.Contended[id]; ok {
			if now.Sub(t) < contendedFor {
				continue
			}
			delete(c.Contended, id)
		}
		k := *a
		k.seqBefore, k.entryBefore, k.ExpiredChecked, k.Kept, k.Answered = k.Seq, k.EntryID, false, true, false
		c.Kept[id] = k
	}
	dropOver(c.IDs, AccountIDsMax, func(_ AccountKey, id int64) { delete(c.Kept, id) })
	dropOver(c.Kept, keptStatesMax, nil)
	// Contended accounts are at most those of contendedFor's worth of
	// collisions; should that pass the bound, the list forgets some, which
	// only lets their states be kept again (a collision puts them back).
	dropOver(c.Contended, keptStatesMax, nil)
}

// ForgetStale drops the kept states a failed attempt used, when its error
// says one of them may be stale (staleState), and makes them suspect: the
// next commit that reads one fresh puts it on the contended list if it
// moved (learn). When the error says kept accounts are gone from the
// database, it forgets everything.
func (c *AccountCache) ForgetStale(st *State, err error, now time.Time) {
	switch staleState(err) {
	case stateFresh:
		return
	case stateGone:
		c.forget()
		return
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if len(c.Contended) > keptStatesMax { // accounts contended once and not seen since
		for id, t := range c.Contended {
			if now.Sub(t) >= contendedFor {
				delete(c.Contended, id)
			}
		}
	}
	if c.suspect == nil || len(c.suspect) > keptStatesMax { // suspects never read again
		c.suspect = map[int64]int64{}
	}
	for id, a := range st.AccountsByID {
		if !a.Kept {
			continue
		}
		delete(c.Kept, id)
		c.suspect[id] = a.entryBefore
	}
}

// forget drops everything known: the database was restored or replaced.
func (c *AccountCache) forget() {
	c.Mu.Lock()
	c.IDs, c.Kept, c.Contended, c.suspect = nil, nil, nil, nil
	c.Mu.Unlock()
}

// What a failed attempt's error says of the kept states it used.
const (
	stateFresh = iota // nothing: they may all be current
	stateStale        // one may be stale
	stateGone         // accounts kept are gone from the database
)

// staleState reads err: a ledger row's id taken (ledger_entries_pkey), a
// kept state found older than the account's newest row (settle_kept) or
// behind the rows read beside it (ErrKeptStale), or a deadlock between two
// writers of the same accounts, are stale states;
// settle_kept's "gone" is a database replaced under the process.
func staleState(err error) int {
	if errors.Is(err, ErrKeptStale) {
		return stateStale
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return stateFresh
	}
	switch {
	case pgErr.Code == "23505" && dberr.Constraint(err) == "ledger_entries_pkey", pgErr.Code == "40P01":
		return stateStale
	case pgErr.Code == "40001" && strings.HasPrefix(pgErr.Message, "settle_kept:"):
		if strings.Contains(pgErr.Message, "are gone from the database") {
			return stateGone
		}
		return stateStale
	}
	return stateFresh
}
