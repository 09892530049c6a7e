package inspect

// Dead letters for operators: listing and reading them. Replaying one is
// producing its original bytes and headers back to its source topic, which
// callers do with a Kafka client: this package never talks to Kafka. A
// replayed record goes through the pipeline like any other, so its identity
// keeps a second replay from settling anything twice.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// DeadLetterPageRowsMax caps one page of dead letters: their bytes are
// held in memory (each at most the record size limit).
const DeadLetterPageRowsMax = 1000

// DeadLetter is one dead-lettered input record with its original bytes.
type DeadLetter struct {
	ID         int64               `json:"id"`
	TenantID   string              `json:"tenant_id"` // "" when the record's tenant could not be read
	Source     message.Coordinates `json:"source"`
	Key        []byte              `json:"key"`   // base64 in JSON
	Value      []byte              `json:"value"` // base64 in JSON
	Headers    []record.Header     `json:"headers"`
	Reason     string              `json:"reason"`
	ErrorClass string              `json:"error_class"`
	Error      string              `json:"error"`
	Attempts   int                 `json:"attempts"`
	At         time.Time           `json:"at"`
	Replays    int                 `json:"replays"` // times it was sent back to its source topic
}

// FailsAgain reports whether a replay of d would be dead-lettered again:
// its own bytes failed (class invalid_input: not JSON, too large, a field
// wrong) and a replay sends the same bytes. A transient failure can settle
// on a replay, and so can a batch too large as a whole (a replay sends its
// records one by one).
func (d DeadLetter) FailsAgain() bool {
	return d.ErrorClass == "invalid_input" && d.Reason != message.ReasonBatchTooLarge
}

// ReplayHeader names, on a replayed record, the source coordinates of the
// dead letter it was replayed from ("topic/partition/offset"); a replayed
// record that fails again keeps it among its headers.
const ReplayHeader = "dlq_replay_of"

// ReplayOf is where the dead letter d was replayed from, when its record
// was a replay (ReplayHeader); ok is false otherwise.
func (d DeadLetter) ReplayOf() (from message.Coordinates, ok bool) {
	for _, h := range d.Headers {
		if h.Key != ReplayHeader {
			continue
		}
		parts := strings.Split(string(h.Value), "/") // a topic name holds no slash
		if len(parts) != 3 || parts[0] == "" {
			return from, false
		}
		p, err1 := strconv.ParseInt(parts[1], 10, 32)
		o, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return from, false
		}
		return message.Coordinates{Topic: parts[0], Partition: int32(p), Offset: o}, true
	}
	return from, false
}

// DeadLetterBySource is the id of the dead letter of tenant's input record
// at c, or ErrNoSuchDeadLetter.
func (s *Store) DeadLetterBySource(ctx context.Context, tenant string, c message.Coordinates) (int64, error) {
	id, err := db.On(s.pool).DeadLetterBySource(ctx, db.DeadLetterBySourceParams{TenantID: tenant, Topic: c.Topic,
		Partition: c.Partition, SourceOffset: c.Offset})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("dead letter of %s/%d@%d: %w", c.Topic, c.Partition, c.Offset, ErrNoSuchDeadLetter)
	}
	if err != nil {
		return 0, dberr.Wrap("find a dead letter by its source", err)
	}
	return id, nil
}

// DeadLetterFilter selects dead letters, oldest first.
type DeadLetterFilter struct {
	Tenant     string // "" = any (and those whose tenant could not be read)
	Reason     string // "" = any
	Topic      string // source topic; "" = any
	ErrorClass string // "" = any
	AfterID    int64  // keyset: ids above this one
	UpToID     int64  // ids up to this one; 0 = any
	Limit      int    // 0 = 100; at most DeadLetterPageRowsMax
	// NotReplayed leaves out the dead letters replayed before.
	NotReplayed bool
}

// ErrNoSuchDeadLetter is returned by DeadLetter for an id that does not exist.
var ErrNoSuchDeadLetter = errors.New("no such dead letter")

// DeadLetters returns one page of dead letters matching f.
func (s *Store) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > DeadLetterPageRowsMax {
		return nil, fmt.Errorf("%w: limit %d: want 1 to %d", ErrBadFilter, f.Limit, DeadLetterPageRowsMax)
	}
	upTo := f.UpToID
	if upTo == 0 {
		upTo = 1<<63 - 1
	}
	rows, err := db.On(pgq.Planned(s.pool)).DeadLetterList(ctx, db.DeadLetterListParams{Tenant: f.Tenant, Reason: f.Reason, Topic: f.Topic,
		ErrorClass: f.ErrorClass, AfterID: f.AfterID, UpToID: upTo, PageRows: int64(limit), NotReplayed: f.NotReplayed})
	if err != nil {
		return nil, dberr.Wrap("list dead letters", err)
	}
	out := make([]DeadLetter, 0, len(rows))
	for _, r := range rows {
		d, err := deadLetter(r)
		if err != nil {
			return nil, dberr.Wrap("list dead letters", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeadLetter returns one dead letter, or ErrNoSuchDeadLetter.
func (s *Store) DeadLetter(ctx context.Context, id int64) (*DeadLetter, error) {
	r, err := db.On(s.pool).DeadLetterGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrNoSuchDeadLetter)
	}
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read dead letter %d", id), err)
	}
	d, err := deadLetter(r)
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read dead letter %d", id), err)
	}
	return &d, nil
}

// DeadLetterMaxID is the highest dead letter id so far (0 for none): a
// replay of "all" stops there, so the dead letters it causes are not
// replayed again by the same run.
func (s *Store) DeadLetterMaxID(ctx context.Context) (int64, error) {
	id, err := db.On(s.pool).DeadLetterMax(ctx)
	if err != nil {
		return 0, dberr.Wrap("read dead letters", err)
	}
	return id, nil
}

// deadLetterRow is the row of both queries that read whole dead letters.
type deadLetterRow interface {
	db.DeadLetterGetRow | db.DeadLetterListRow
}

func deadLetter[R deadLetterRow](row R) (DeadLetter, error) {
	r := db.DeadLetterGetRow(row)
	d := DeadLetter{ID: r.ID, TenantID: r.TenantID, Source: message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, Key: r.Key,
		Value: r.Value, Reason: r.Reason, ErrorClass: r.ErrorClass, Error: r.Error, Attempts: int(r.Attempts), At: r.At,
		Replays: int(r.Replays)}
	var err error
	if d.Headers, err = pgq.DecodeHeaders(r.Headers); err != nil {
		return d, fmt.Errorf("dead letter %d: headers: %w", d.ID, err)
	}
	return d, nil
}
