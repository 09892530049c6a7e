// Package outbox is the relay's side of settle's outbox (tables outbox,
// outbox_queue, outbox_parked): the lease that makes one relay the leader,
// and the reads, marks and parks the leader makes under it. The settling
// transaction (package settle) writes the rows; the relay (package relay)
// publishes them through this package; analysts read them through
// settle/inspect.
//
// Its statements are the files in sql/, run through the generated
// queries. Its errors say what was being done and carry
// dberr.ErrUnavailable when the database itself failed.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/relay/outbox/internal/db"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
)

// Store is the outbox of one settle database.
type Store struct {
	pool    *pgxpool.Pool
	written Written
}

// Written is what the relay takes from the settling store of its own
// process: its pool, a signal after every commit that wrote outbox rows,
// and those rows' messages as the commit kept them, until they are
// published or parked. *settle.Store is one.
type Written interface {
	Pool() *pgxpool.Pool
	OutboxWritten() <-chan struct{}
	WrittenMessage(id int64) (settle.WrittenRow, bool)
	ForgetWritten(ids []int64)
}

// New returns the outbox of the database of w, over its pool.
func New(w Written) *Store { return &Store{pool: w.Pool(), written: w} }

// Written receives after a transaction of this process's store that wrote
// outbox rows has committed (Written.OutboxWritten).
func (s *Store) Written() <-chan struct{} { return s.written.OutboxWritten() }

// pendingLimit bounds one read of the outbox.
const pendingLimit = 100_000

// Message is one outbox row: a message a settling transaction wrote for
// the relay to publish.
type Message struct {
	ID      int64
	Topic   string
	Key     []byte
	Value   []byte
	Headers []record.Header
}

// Lease is the outbox relay's leadership: a session-level advisory
// lock held on a connection of its own, taken out of the pool so that
// nothing else ever runs on it and the pool never recycles it under the
// lock.
//
// Why a lock and not SELECT ... FOR UPDATE SKIP LOCKED: one leader
// publishes rows strictly in id order, which is what keeps every account's
// settlements in sequence on the topic; competing relays skipping each
// other's rows would interleave them. Why on its own connection: a
// session lock lives exactly as long as its connection, so a relay that
// dies or loses its connection loses leadership at once, and every read and
// mark the leader does runs on that connection, so a leader that lost the
// lock finds out on its next statement instead of publishing on. The lock
// does not survive a connection pooler in transaction mode: point the
// service at PostgreSQL itself (or a session-mode pool).
//
// A Lease is not safe for concurrent use.
type Lease struct {
	conn    *pgx.Conn
	key     int64
	held    bool
	written Written // the settlements its process wrote
	// queued are the queue rows the last Pending read, each with the ids
	// of its messages not yet published or parked.
	queued []db.OutboxQueueHeadRow
}

// ErrNotLeader is returned by Lease.Pending, MarkPublished and Park when
// the lease does not hold the lock: call TryAcquire first.
var ErrNotLeader = errors.New("outbox lease not held: another relay is the leader")

// Lease opens a dedicated connection for the outbox relay's lock named by
// key. It does not take the lock: call TryAcquire. Close it when done;
// closing releases the lock.
func (s *Store) Lease(ctx context.Context, key int64) (*Lease, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, dberr.Wrap("open outbox lease connection", err)
	}
	conn := pc.Hijack()
	pgq.FastArrays(conn.TypeMap())
	// A relay frozen while it holds the lock (SIGSTOP, a paused VM) keeps
	// its connection open and the kernel keeps answering for it, so no
	// other relay could ever lead. A live relay talks on this connection
	// several times a second (leader) or every StandbyInterval (standby);
	// a session silent for longer than this is ended by PostgreSQL, which
	// releases the lock. The frozen relay, when it wakes, finds its
	// connection gone on its next statement and steps down.
	//
	// Its queries read and mark rows by key (the queue's and the outbox's
	// primary keys): plans stay on index probes, as
	// in a settling transaction (pgq.ProbesOnly).
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = '%dms'; %s",
		LeaseIdleMax.Milliseconds(), pgq.ProbesOnly("SET"))); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, dberr.Wrap("open outbox lease connection", err)
	}
	return &Lease{conn: conn, key: key, written: s.written}, nil
}

// LeaseIdleMax is how long the relay's lock connection may stay
// silent before PostgreSQL ends it and another relay may lead. Relays must
// talk on it more often (their standby interval is below it).
const LeaseIdleMax = 10 * time.Second

// KeepAlive talks on the lease's connection every LeaseIdleMax/4 until the
// returned stop is called, so that a leader waiting on something else (a
// broker that is down, and a produce franz-go retries until it is back)
// keeps its lock: silent for LeaseIdleMax, its session was ended, another
// relay took the lead while this one still published, and what it had in
// hand went out twice. A frozen process stops talking too, and loses the
// lock as before. Between KeepAlive and stop, nothing else may use the
// lease; after stop, a failed ping shows on the lease's next statement.
func (l *Lease) KeepAlive(ctx context.Context) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(LeaseIdleMax / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := l.conn.Exec(ctx, "SELECT 1"); err != nil {
					_ = l.fail("keep the outbox lease", err)
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// TryAcquire takes the lock if no other session holds it, without waiting.
// It reports whether this lease now holds it.
func (l *Lease) TryAcquire(ctx context.Context) (bool, error) {
	if l.held {
		return true, nil
	}
	held, err := db.On(l.conn).OutboxLeaseTry(ctx, l.key)
	if err != nil {
		return false, dberr.Wrap("take outbox lease", err)
	}
	l.held = held
	return l.held, nil
}

// Held reports whether the lease took the lock (and has seen no failure of
// its connection since).
func (l *Lease) Held() bool { return l.held }

// Pending returns the unpublished outbox rows of the oldest queue rows, in
// queue order and in id order within each: whole queue rows, until there
// are limit rows or more (the last queue row may take it past limit). Fewer
// than limit rows means the queue held no more.
func (l *Lease) Pending(ctx context.Context, limit int) ([]Message, error) {
	if !l.held {
		return nil, ErrNotLeader
	}
	if limit <= 0 || limit > pendingLimit {
		return nil, fmt.Errorf("outbox pending: limit %d must be between 1 and %d", limit, pendingLimit)
	}
	// The queue's head first, then each message: a settlement this
	// process wrote from memory (Written.WrittenMessage), the others
	// read by key. Both statements run on the session's cached generic plan
	// (pgq.ProbesOnly): they probe each row by its key (outbox.sql's OutboxPending),
	// so the plan made while the tables were empty serves them grown.
	q := db.On(l.conn)
	head, err := q.OutboxQueueHead(ctx, int32(limit))
	if err != nil {
		return nil, l.fail("read outbox queue", err)
	}
	n := 0
	for i, h := range head {
		if n >= limit {
			head = head[:i]
			break
		}
		n += len(h.Ids)
	}
	l.queued = head
	// rows[i] is ids[i]'s message: from memory, or (nil until then) read
	// below.
	ids, rows := make([]int64, 0, n), make([]*db.OutboxPendingRow, 0, n)
	var read db.OutboxPendingParams
	for _, h := range head {
		missing := false
		for _, id := range h.Ids {
			ids = append(ids, id)
			if r, ok := l.written.WrittenMessage(id); ok {
				row := db.OutboxPendingRow(r)
				rows = append(rows, &row)
				continue
			}
			rows = append(rows, nil)
			read.TenantID, read.ID = append(read.TenantID, h.TenantID), append(read.ID, id)
			missing = true
		}
		if missing { // its messages may be the settlements of the row keyed like it
			read.QueueTenantID, read.QueueID = append(read.QueueTenantID, h.TenantID), append(read.QueueID, h.ID)
		}
	}
	if len(read.ID) > 0 {
		got, err := q.OutboxPending(ctx, read)
		if err != nil {
			return nil, l.fail("read outbox", err)
		}
		byID := make(map[int64]*db.OutboxPendingRow, len(got))
		for i := range got {
			byID[got[i].ID] = &got[i]
		}
		for i, r := range rows {
			if r == nil {
				rows[i] = byID[ids[i]] // nil: not in the outbox (pruned by hand)
			}
		}
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		if r == nil {
			continue
		}
		m, err := pendingMessage(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// pendingMessage is the message of an outbox row read from the tables.
func pendingMessage(r *db.OutboxPendingRow) (Message, error) {
	m := Message{ID: r.ID, Topic: r.Topic, Key: r.Key, Value: r.Value}
	if m.Value == nil {
		m.Value = r.Response // a settlement: its message is its identity's stored response
	}
	var err error
	if m.Headers, err = pgq.DecodeHeaders(r.StoredHeaders); err != nil {
		return m, fmt.Errorf("read outbox row %d: headers: %w", m.ID, err)
	}
	if r.Sequence != nil && r.SettlementID != nil && r.Kind != nil && r.Version != nil {
		m.Headers = append(settlementHeaders(*r.SettlementID, r.SettlementTenantID, *r.Sequence, *r.Kind, int(*r.Version)), m.Headers...)
	}
	return m, nil
}

// settlementHeaders are the headers of a settlement's message, before the
// trace context its outbox row stores: outbox_messages builds the same, in
// SQL, for the other readers (TestSettlementMessageHeaders holds the two
// to one another).
func settlementHeaders(settlementID, tenantID string, sequence int64, kind string, version int) []record.Header {
	return []record.Header{
		{Key: "settlement_id", Value: []byte(settlementID)},
		{Key: "tenant_id", Value: []byte(tenantID)},
		{Key: "sequence", Value: strconv.AppendInt(nil, sequence, 10)},
		{Key: "kind", Value: []byte(kind)},
		{Key: "version", Value: strconv.AppendInt(nil, int64(version), 10)},
	}
}

// MarkPublished records that the rows ids, of the last Pending, were
// acknowledged by the broker.
func (l *Lease) MarkPublished(ctx context.Context, ids []int64) error {
	if !l.held {
		return ErrNotLeader
	}
	if len(ids) == 0 {
		return nil
	}
	return l.done(ctx, ids)
}

// Park is why one outbox row is parked: the broker refused its message
// for good.
type Park struct {
	ID     int64
	Reason string // the broker's error code in lower case, e.g. message_too_large
	Error  string // the producer's error text
}

// Park records why the broker refused rows of the last Pending for good
// and takes them off the queue: the relay publishes what follows them
// instead of retrying them for ever. Parking is terminal; the rows stay in
// the outbox.
func (l *Lease) Park(ctx context.Context, rows []Park) error {
	if !l.held {
		return ErrNotLeader
	}
	if len(rows) == 0 {
		return nil
	}
	tenants := map[int64]string{}
	for _, h := range l.queued {
		for _, id := range h.Ids {
			tenants[id] = h.TenantID
		}
	}
	var p db.OutboxParkParams
	for _, r := range rows {
		if t, ok := tenants[r.ID]; ok { // a row of the last Pending, still queued
			p.TenantID, p.ID = append(p.TenantID, t), append(p.ID, r.ID)
			p.Reason, p.Error = append(p.Reason, r.Reason), append(p.Error, r.Error)
		}
	}
	if len(p.ID) == 0 {
		return nil
	}
	if err := db.On(l.conn).OutboxPark(ctx, p); err != nil {
		return l.fail("park outbox rows", err)
	}
	return l.done(ctx, p.ID)
}

// done takes the outbox rows ids (published or parked) off the queue rows
// of the last Pending that name them: a queue row left with none is
// deleted, one left with some keeps only those (OutboxRequeue).
func (l *Lease) done(ctx context.Context, ids []int64) error {
	gone := make(map[int64]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	var mark db.OutboxMarkParams
	var requeue []db.OutboxRequeueParams
	kept := l.queued[:0]
	for _, h := range l.queued {
		left := make([]int64, 0, len(h.Ids))
		for _, id := range h.Ids {
			if !gone[id] {
				left = append(left, id)
			}
		}
		switch {
		case len(left) == 0:
			mark.TenantID, mark.ID = append(mark.TenantID, h.TenantID), append(mark.ID, h.ID)
			continue
		case len(left) < len(h.Ids):
			requeue = append(requeue, db.OutboxRequeueParams{TenantID: h.TenantID, ID: h.ID, Ids: left})
			h.Ids = left
		}
		kept = append(kept, h)
	}
	l.queued = kept
	q := db.On(l.conn)
	if len(mark.ID) > 0 {
		if err := q.OutboxMark(ctx, mark); err != nil {
			return l.fail("mark outbox rows published", err)
		}
	}
	for _, r := range requeue {
		if err := q.OutboxRequeue(ctx, r); err != nil {
			return l.fail("mark outbox rows published", err)
		}
	}
	l.written.ForgetWritten(ids)
	return nil
}

// Close closes the lease's connection, which releases the lock.
func (l *Lease) Close(ctx context.Context) error {
	l.held = false
	return l.conn.Close(ctx)
}

// fail wraps an error of the lease's connection. A broken connection has
// lost the lock with it, so the lease stops claiming to hold it.
func (l *Lease) fail(what string, err error) error {
	err = dberr.Wrap(what, err)
	if l.conn.IsClosed() || errors.Is(err, dberr.ErrUnavailable) {
		l.held = false
	}
	return err
}
