package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
)

var (
	sqlOutboxBacklog = mustQuery("outbox_backlog.sql")
	sqlOutboxParked  = mustQuery("outbox_parked_list.sql")
)

// OutboxBacklog reports how many outbox rows wait to be published and when
// the oldest of them was written (now when none wait).
func (s *Store) OutboxBacklog(ctx context.Context) (rows int64, oldest time.Time, err error) {
	if err := s.pool.QueryRow(ctx, sqlOutboxBacklog).Scan(&rows, &oldest); err != nil {
		return 0, time.Time{}, wrapStoreErr("read outbox backlog", err)
	}
	return rows, oldest, nil
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
	rows, err := s.pool.Query(ctx, sqlOutboxParked, afterID, limit)
	if err != nil {
		return nil, wrapStoreErr("list parked outbox rows", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedMessage, error) {
		var (
			m       ParkedMessage
			headers []byte
		)
		if err := r.Scan(&m.ID, &m.Topic, &m.Key, &m.ValueBytes, &headers, &m.Reason, &m.Error, &m.CreatedAt, &m.ParkedAt); err != nil {
			return m, err
		}
		var err error
		if m.Headers, err = settle.DecodeHeaders(headers); err != nil {
			return m, fmt.Errorf("parked outbox row %d: headers: %w", m.ID, err)
		}
		return m, nil
	})
	if err != nil {
		return nil, wrapStoreErr("list parked outbox rows", err)
	}
	if out == nil {
		out = []ParkedMessage{}
	}
	return out, nil
}
