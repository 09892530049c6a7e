package analyst

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// Resender corrects a dead letter and sends the corrected record to the
// letter's source topic, where it settles like any record: it records the
// edit (the diff), by whom and why, in the transaction that sends it.
// Declared here, implemented by package service with its Kafka producer.
type Resender interface {
	Resend(ctx context.Context, d inspect.DeadLetter, edits []inspect.FieldEdit, by, reason string) (*Resent, error)
}

// Resent is a correction recorded and its record sent.
type Resent struct {
	DeadLetterID int64                 `json:"dead_letter_id"`
	EditID       int64                 `json:"edit_id"`
	EditedBy     string                `json:"edited_by"`
	At           time.Time             `json:"at"`
	Diff         []inspect.FieldChange `json:"diff"`
	To           message.Coordinates   `json:"to"`
}

// ResendRequest is the body of POST /api/dlq/{id}/resend: the fields to
// set (each to a JSON value), the fields to remove, and why.
type ResendRequest struct {
	Set    map[string]json.RawMessage `json:"set"`
	Unset  []string                   `json:"unset"`
	Reason string                     `json:"reason"`
}

// errNoResender: this listener was started without a way to the broker.
var errNoResender = errors.New("resend is not available on this listener (no Kafka producer): use `settle dlq resend`")

// edits are the request's changes, in the order of their fields' names.
func (in ResendRequest) edits() []inspect.FieldEdit {
	out := make([]inspect.FieldEdit, 0, len(in.Set)+len(in.Unset))
	for f, v := range in.Set {
		out = append(out, inspect.FieldEdit{Field: f, Value: v})
	}
	for _, f := range in.Unset {
		out = append(out, inspect.FieldEdit{Field: f})
	}
	slices.SortStableFunc(out, func(a, b inspect.FieldEdit) int { return strings.Compare(a.Field, b.Field) })
	return out
}

// resend corrects the dead letter of r's path with edits and resends it,
// as the request's analyst.
func (h *handler) resend(r *http.Request, edits []inspect.FieldEdit, reason string) (*Resent, error) {
	id, err := deadLetterID(r)
	if err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return nil, fmt.Errorf("%w: a reason is required: say why the record is corrected", errBadRequest)
	case len(reason) > inspect.EditReasonBytesMax:
		return nil, fmt.Errorf("%w: the reason is over %d bytes", errBadRequest, inspect.EditReasonBytesMax)
	case badText(reason) != "":
		return nil, fmt.Errorf("%w: reason %s; send UTF-8 text without NUL bytes", errBadRequest, badText(reason))
	case len(edits) == 0:
		return nil, fmt.Errorf("%w: no field to change", errBadRequest)
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	d, err := h.cfg.Store.DeadLetter(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, _, err := inspect.EditValue(d.Value, edits); err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", id, err)
	}
	if h.cfg.Resender == nil {
		return nil, errNoResender
	}
	by := analystOf(r)
	if by == "" {
		by = "page" // a surface without tokens: whoever reached the loopback port
	}
	res, err := h.cfg.Resender.Resend(ctx, *d, edits, by, reason)
	if err != nil {
		return nil, err
	}
	h.log.Info("dead letter corrected and resent", "dead_letter", id, "edit", res.EditID, "analyst", res.EditedBy,
		"to", fmt.Sprintf("%s/%d@%d", res.To.Topic, res.To.Partition, res.To.Offset))
	return res, nil
}

// resendFailure is what a failed resend says: the client's mistake as it
// is, a refusal of the broker or the database as a sentence (the details
// go to the service log).
func (h *handler) resendFailure(r *http.Request, err error) (int, string) {
	switch code := status(err); {
	case errors.Is(err, errNoResender):
		return http.StatusServiceUnavailable, err.Error()
	case code != http.StatusInternalServerError:
		return code, publicError(err)
	}
	h.log.Error("resend dead letter", "path", r.URL.Path, "err", err)
	return http.StatusBadGateway, "the corrected record was not sent, and nothing was recorded: the service log has the details; try again"
}

func (h *handler) apiResend(w http.ResponseWriter, r *http.Request) {
	var in ResendRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		h.fail(w, r, fmt.Errorf("%w: body: %w (send {\"set\": {\"field\": value}, \"unset\": [\"field\"], \"reason\": ...})", errBadRequest, err), true)
		return
	}
	res, err := h.resend(r, in.edits(), in.Reason)
	if err != nil {
		code, msg := h.resendFailure(r, err)
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// resendForm is the letter page's correction: one change a line
// ("field=text", "field:=json"), and a reason. It answers 303 to the
// letter's page, which lists the edit and where its record went.
func (h *handler) resendForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, settleBadFilter("form: %v", err), false)
		return
	}
	var edits []inspect.FieldEdit
	var err error
	for _, line := range strings.Split(r.PostForm.Get("set"), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, perr := inspect.ParseFieldEdit(line)
		if perr != nil {
			err = perr
			break
		}
		edits = append(edits, e)
	}
	var res *Resent
	if err == nil {
		res, err = h.resend(r, edits, r.PostForm.Get("reason"))
	}
	if err != nil {
		code, msg := h.resendFailure(r, err)
		h.showDeadLetter(w, r, code, msg)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/dlq/%d?resent=%s#edits", res.DeadLetterID, strconv.FormatInt(res.EditID, 10)), http.StatusSeeOther)
}
