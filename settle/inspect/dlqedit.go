package inspect

// Correcting a dead letter: an operator edits the top-level fields of its
// record (a JSON object) and resends it. The letter keeps its bytes; the
// edit is a diff of fields, recorded with who made it and why
// (retention.Store.Resend). This file holds what an edit is and how it is
// applied; it sends nothing.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// ResendHeader names, on a record resent from a dead letter after an
// edit, the letter's id. Like ReplayHeader it is not material: the resent
// record's identity and fingerprint are those of its edited fields, as a
// producer sending them would get.
const ResendHeader = "dlq_resend_of"

// Limits of one edit: a record is small, and so is what an analyst types.
const (
	EditFieldsMax      = 32   // fields one edit sets or removes
	EditFieldBytesMax  = 128  // a field's name
	EditValueBytesMax  = 4096 // a field's new value, as JSON
	EditReasonBytesMax = 1000
)

// ErrBadEdit is an edit that cannot be applied to its letter.
var ErrBadEdit = errors.New("bad edit")

// FieldEdit is one change to a dead letter's record: a top-level field set
// to a JSON value, or removed (Value nil).
type FieldEdit struct {
	Field string          `json:"field"`
	Value json.RawMessage `json:"value"` // nil: remove the field
}

// ParseFieldEdit reads one edit as the CLI and the page write it:
// "field=text" sets field to the string text, "field:=json" to the JSON
// value json (a number, true, null, an object...).
func ParseFieldEdit(s string) (FieldEdit, error) {
	i := strings.IndexByte(s, '=')
	if i <= 0 {
		return FieldEdit{}, fmt.Errorf("%w: %q: write field=text or field:=json", ErrBadEdit, s)
	}
	field, v := s[:i], s[i+1:]
	if strings.HasSuffix(field, ":") {
		field = strings.TrimSuffix(field, ":")
		if !json.Valid([]byte(v)) {
			return FieldEdit{}, fmt.Errorf("%w: %s:=%s: not a JSON value (write %s=text for a string)", ErrBadEdit, field, v, field)
		}
		var c bytes.Buffer
		_ = json.Compact(&c, []byte(v)) // valid above
		return FieldEdit{Field: field, Value: c.Bytes()}, nil
	}
	q, _ := json.Marshal(v) // a Go string always marshals
	return FieldEdit{Field: field, Value: q}, nil
}

// FieldChange is one field of an edit's diff: its JSON value before and
// after, null when absent.
type FieldChange struct {
	Field string          `json:"field"`
	From  json.RawMessage `json:"from"`
	To    json.RawMessage `json:"to"`
}

var jsonNull = json.RawMessage("null")

// EditValue applies edits to value, a dead letter's record, and returns
// the record as a producer sending the edited fields would (a compact JSON
// object, the fields in their order, new ones last, each untouched value
// byte for byte) and the diff. It refuses a value that is not a JSON
// object, a field named twice (by the record or the edits), and an edit
// that changes nothing.
func EditValue(value []byte, edits []FieldEdit) ([]byte, []FieldChange, error) {
	if len(edits) == 0 {
		return nil, nil, fmt.Errorf("%w: no field to change", ErrBadEdit)
	}
	if len(edits) > EditFieldsMax {
		return nil, nil, fmt.Errorf("%w: %d fields: change at most %d at once", ErrBadEdit, len(edits), EditFieldsMax)
	}
	fields, err := objectFields(value)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the letter's value %w: an edit changes the fields of a JSON object", ErrBadEdit, err)
	}
	at := make(map[string]int, len(fields))
	for i, f := range fields {
		if _, dup := at[f.name]; dup {
			at[f.name] = -1 // named twice: which one settle read is not for an edit to guess
			continue
		}
		at[f.name] = i
	}
	seen := map[string]bool{}
	var diff []FieldChange
	removed := map[int]bool{}
	for _, e := range edits {
		switch {
		case e.Field == "" || len(e.Field) > EditFieldBytesMax:
			return nil, nil, fmt.Errorf("%w: field name %q: 1 to %d bytes", ErrBadEdit, e.Field, EditFieldBytesMax)
		case seen[e.Field]:
			return nil, nil, fmt.Errorf("%w: field %s is changed twice", ErrBadEdit, e.Field)
		case len(e.Value) > EditValueBytesMax:
			return nil, nil, fmt.Errorf("%w: field %s: a value of %d bytes (at most %d)", ErrBadEdit, e.Field, len(e.Value), EditValueBytesMax)
		case e.Value != nil && !json.Valid(e.Value):
			return nil, nil, fmt.Errorf("%w: field %s: not a JSON value", ErrBadEdit, e.Field)
		}
		seen[e.Field] = true
		i, ok := at[e.Field]
		if i < 0 {
			return nil, nil, fmt.Errorf("%w: field %s appears twice in the record: correct it at its producer", ErrBadEdit, e.Field)
		}
		from := jsonNull
		if ok {
			from = fields[i].value
		}
		to := jsonNull
		if e.Value != nil {
			to = e.Value
		}
		if (ok && e.Value != nil && bytes.Equal(fields[i].value, e.Value)) || (!ok && e.Value == nil) {
			continue // this field already says so
		}
		diff = append(diff, FieldChange{Field: e.Field, From: from, To: to})
		switch {
		case e.Value == nil:
			removed[i] = true
		case ok:
			fields[i].value = e.Value
		default:
			fields = append(fields, objectField{name: e.Field, value: e.Value})
		}
	}
	if len(diff) == 0 {
		return nil, nil, fmt.Errorf("%w: the edit changes nothing: the record already says so", ErrBadEdit)
	}
	out := []byte{'{'}
	for i, f := range fields {
		if removed[i] {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(f.name) // a string always marshals
		out = append(append(append(out, k...), ':'), f.value...)
	}
	return append(out, '}'), diff, nil
}

type objectField struct {
	name  string
	value json.RawMessage
}

// objectFields reads the top-level fields of a JSON object in order, each
// value as its bytes.
func objectFields(b []byte) ([]objectField, error) {
	if !json.Valid(b) {
		return nil, errors.New("is not JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, _ := dec.Token(); t != json.Delim('{') {
		return nil, errors.New("is not a JSON object")
	}
	var out []objectField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string) // an object's keys are strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, err
		}
		out = append(out, objectField{name: name, value: c.Bytes()})
	}
	return out, nil
}

// ResendKey is the key a producer gives the record value: tenant_id/subject
// (tenantid/subject for a structured CloudEvent), or fallback when value
// names neither.
func ResendKey(value, fallback []byte) []byte {
	var r struct {
		TenantID string `json:"tenant_id"`
		CETenant string `json:"tenantid"`
		Subject  string `json:"subject"`
	}
	if json.Unmarshal(value, &r) != nil {
		return fallback
	}
	tenant := r.TenantID
	if tenant == "" {
		tenant = r.CETenant
	}
	if tenant == "" || r.Subject == "" {
		return fallback
	}
	return []byte(tenant + "/" + r.Subject)
}

// ResentFrom is the dead letter whose edit d's record was, when it was
// one (ResendHeader); ok is false otherwise.
func (d DeadLetter) ResentFrom() (id int64, ok bool) {
	v, ok := record.HeaderValue(d.Headers, ResendHeader)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n > 0
}

// DeadLetterEdit is one correction of a dead letter: the diff, the bytes
// sent, who and why, and where the resent record went (settle prune keeps
// it since migration 26; nil only where a prune before it removed it).
type DeadLetterEdit struct {
	ID       int64                `json:"id"`
	Diff     []FieldChange        `json:"diff"`
	Value    []byte               `json:"value"` // base64 in JSON
	EditedBy string               `json:"edited_by"`
	Reason   string               `json:"reason"`
	At       time.Time            `json:"at"`
	To       *message.Coordinates `json:"to,omitempty"`
}

// DeadLetterEdits returns the edits of the dead letter d of tenant, oldest
// first.
func (s *Store) DeadLetterEdits(ctx context.Context, tenant string, d int64) ([]DeadLetterEdit, error) {
	rows, err := db.On(s.pool).DeadLetterEditsOf(ctx, db.DeadLetterEditsOfParams{TenantID: tenant, DeadLetterID: d})
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read the edits of dead letter %d", d), err)
	}
	out := make([]DeadLetterEdit, 0, len(rows))
	for _, r := range rows {
		e := DeadLetterEdit{ID: r.ID, Value: r.Value, EditedBy: r.EditedBy, Reason: r.Reason, At: r.At}
		if err := json.Unmarshal(r.Diff, &e.Diff); err != nil {
			return nil, fmt.Errorf("dead letter %d, edit %d: diff: %w", d, r.ID, err)
		}
		if r.Topic != nil {
			e.To = &message.Coordinates{Topic: *r.Topic, Partition: pgq.Deref(r.Partition), Offset: pgq.Deref(r.Offset)}
		}
		out = append(out, e)
	}
	return out, nil
}

// LastReplays is where each of the dead letters ds was last sent back to
// (a replay or a resend), in the order of ds, read in one query; nil for
// one never replayed, or whose replays were pruned.
func (s *Store) LastReplays(ctx context.Context, ds []DeadLetter) ([]*message.Coordinates, error) {
	p := db.DeadLetterReplayLastOfParams{TenantIds: make([]string, len(ds)), DeadLetterIds: make([]int64, len(ds))}
	for i, d := range ds {
		p.TenantIds[i], p.DeadLetterIds[i] = d.TenantID, d.ID
	}
	rows, err := db.On(s.pool).DeadLetterReplayLastOf(ctx, p)
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read the last replays of %d dead letters", len(ds)), err)
	}
	out := make([]*message.Coordinates, len(ds))
	for _, r := range rows {
		out[r.N-1] = &message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	}
	return out, nil
}
