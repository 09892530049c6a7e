package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
)

// OutboxBacklog reports how many outbox rows wait to be published and when
// the oldest of them was written (now when none wait).
func (s *Store) OutboxBacklog(ctx context.Context) (rows int64, oldest time.Time, err error) {
	r, err := db.On(s.pool).OutboxBacklog(ctx)
	if err != nil {
		return 0, time.Time{}, dberr.Wrap("read outbox backlog", err)
	}
	return r.Waiting, r.Oldest, nil
}

// ParkedMessage is one outbox row the relay parked, without its value.
type ParkedMessage struct {
	ID         int64           `json:"id"`
	Topic      string          `json:"topic"`
	Key        []byte          `json:"key"` // base64 in JSON
	ValueBytes int             `json:"value_bytes"`
	Headers    []record.Header `json:"headers"`
	Reason     string          `json:"reason"`
	Error      string          `json:"error"`
	CreatedAt  time.Time       `json:"created_at"`
	ParkedAt   time.Time       `json:"parked_at"`
}

// OutboxParked returns one page of parked outbox rows with an id above
// afterID, oldest first; limit 0 = 100, at most DeadLetterPageRowsMax.
func (s *Store) OutboxParked(ctx context.Context, afterID int64, limit int) ([]ParkedMessage, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > DeadLetterPageRowsMax {
		return nil, fmt.Errorf("%w: limit %d: want 1 to %d", ErrBadFilter, limit, DeadLetterPageRowsMax)
	}
	rows, err := db.On(s.pool).OutboxParkedList(ctx, db.OutboxParkedListParams{AfterID: afterID, PageRows: int64(limit)})
	if err != nil {
		return nil, dberr.Wrap("list parked outbox rows", err)
	}
	out := make([]ParkedMessage, 0, len(rows))
	for _, r := range rows {
		m := ParkedMessage{ID: r.ID, Topic: r.Topic, Key: r.Key, ValueBytes: int(r.ValueBytes), Reason: r.Reason, Error: r.Error,
			CreatedAt: r.CreatedAt, ParkedAt: r.At}
		if m.Headers, err = pgq.DecodeHeaders(r.Headers); err != nil {
			return nil, dberr.Wrap("list parked outbox rows", fmt.Errorf("parked outbox row %d: headers: %w", m.ID, err))
		}
		out = append(out, m)
	}
	return out, nil
}
