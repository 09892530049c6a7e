package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
)

// Resend is a correction of a dead letter: the fields to change, who
// changes them and why.
type Resend struct {
	Letter inspect.DeadLetter
	Edits  []inspect.FieldEdit
	// By is who edits: the token's name on the page; a person's database
	// login is recorded whatever By says (migration 0024).
	By     string
	Reason string
}

// Resent is what a resend did: the edit as recorded and where its record
// went.
type Resent struct {
	retention.Resent
	DeadLetterID int64                 `json:"dead_letter_id"`
	Diff         []inspect.FieldChange `json:"diff"`
}

// ResendDeadLetter applies rs's edits to its letter's record and sends the
// result to the letter's source topic through the outlet, as a producer
// would have sent it: the edited value, the key a producer gives it
// (tenant_id/subject), the letter's headers but its replay marks, and
// inspect.ResendHeader naming the letter. The record is then settled by the
// consumer like any other: its identity and fingerprint are its edited
// fields'. The edit, who and why are recorded in the transaction that
// sends it (retention.Store.Resend); the letter keeps its bytes.
func ResendDeadLetter(ctx context.Context, cl *kgo.Client, store *settle.Store, rs Resend) (*Resent, error) {
	d := rs.Letter
	if d.Reason == message.ReasonBatchTooLarge {
		return nil, fmt.Errorf("%w: dead letter %d is a whole record batch: replay it (its records go one by one), then correct the letters they make", inspect.ErrBadEdit, d.ID)
	}
	if rs.Reason == "" || len(rs.Reason) > inspect.EditReasonBytesMax {
		return nil, fmt.Errorf("%w: a reason of 1 to %d bytes is required", inspect.ErrBadEdit, inspect.EditReasonBytesMax)
	}
	value, diff, err := inspect.EditValue(d.Value, rs.Edits)
	if err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", d.ID, err)
	}
	rec := &kgo.Record{Topic: d.Source.Topic, Key: inspect.ResendKey(value, d.Key), Value: value}
	for _, h := range kafkahdr.ToKafka(d.Headers) {
		if h.Key != inspect.ReplayHeader && h.Key != inspect.ResendHeader {
			rec.Headers = append(rec.Headers, h)
		}
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: inspect.ResendHeader, Value: []byte(strconv.FormatInt(d.ID, 10))})
	diffJSON, err := json.Marshal(diff)
	if err != nil {
		return nil, err
	}
	o := outlet.New(cl, outlet.Config{Attempts: 1})
	send := func(ctx context.Context, _ int64) (message.Coordinates, error) {
		s, _ := o.Produce(ctx, rec) // its outcome is read below
		if err := s.Outcome(0); err != nil {
			return message.Coordinates{}, fmt.Errorf("send to %s: %w", d.Source.Topic, err)
		}
		r := s.Record(0)
		return message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil
	}
	done, err := retention.New(store).Resend(ctx, retention.Edit{TenantID: d.TenantID, DeadLetterID: d.ID, Diff: diffJSON,
		Key: rec.Key, Value: value, By: rs.By, Reason: rs.Reason}, send)
	if err != nil {
		return nil, err
	}
	return &Resent{Resent: *done, DeadLetterID: d.ID, Diff: diff}, nil
}

// Resend is the analysts' page's correction (analyst.Resender), on the
// service's producer; the edit records the token's analyst.
func (r kafkaReplayer) Resend(ctx context.Context, d inspect.DeadLetter, edits []inspect.FieldEdit, by, reason string) (*analyst.Resent, error) {
	res, err := ResendDeadLetter(ctx, r.cl, r.store, Resend{Letter: d, Edits: edits, By: by, Reason: reason})
	if err != nil {
		return nil, err
	}
	return &analyst.Resent{DeadLetterID: res.DeadLetterID, EditID: res.EditID, EditedBy: res.By, At: res.At, Diff: res.Diff, To: res.To}, nil
}
