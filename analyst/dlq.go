package analyst

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// ReplayDeadLettersMax caps the dead letters one replay produces: the dry
// run lists them all and the confirmation names each by id, so what is
// replayed is exactly what the analyst saw.
const ReplayDeadLettersMax = 100

func settleBadFilter(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{inspect.ErrBadFilter}, args...)...)
}

// renderCode renders a page with a status other than 200.
func (h *handler) renderCode(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	h.render(w, r, name, data)
}

func deadLetterID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, settleBadFilter("dead letter id %q", r.PathValue("id"))
	}
	return id, nil
}

// shownBytes is a byte string as the page shows it: as text when it is
// UTF-8 (indented when it is JSON), always as hex.
type shownBytes struct {
	Len  int
	Text string // "" when not UTF-8 text
	JSON bool
	Hex  string
}

func showBytes(b []byte) shownBytes {
	s := shownBytes{Len: len(b), Hex: hexDump(b)}
	if utf8.Valid(b) {
		s.Text = string(b)
		if out, ok := indentJSON(b); ok {
			s.Text, s.JSON = out, true
		}
	}
	return s
}

// hexDumpBytesMax caps the hex shown of one value (records are at most the
// decoder's size limit, but a page of hex helps nobody beyond this).
const hexDumpBytesMax = 4096

func hexDump(b []byte) string {
	cut := len(b) > hexDumpBytesMax
	if cut {
		b = b[:hexDumpBytesMax]
	}
	d := hex.Dump(b)
	if cut {
		d += "…\n"
	}
	return d
}

func (h *handler) deadLetterPage(w http.ResponseWriter, r *http.Request) {
	h.showDeadLetter(w, r, http.StatusOK, "")
}

// showDeadLetter renders a dead letter's page with code; failed, when not
// "", is why the correction form's submission failed (the form keeps what
// was typed).
func (h *handler) showDeadLetter(w http.ResponseWriter, r *http.Request, code int, failed string) {
	_, d, ok := load(h, w, r, false, deadLetterID, h.cfg.Store.DeadLetter)
	if !ok {
		return
	}
	type header struct {
		Key   string
		Value shownBytes
	}
	hs := make([]header, len(d.Headers))
	for i, hd := range d.Headers {
		hs[i] = header{hd.Key, showBytes(hd.Value)}
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	// A replay that failed again: the letter it was replayed from.
	replayOf := int64(0)
	if from, ok := d.ReplayOf(); ok {
		id, err := h.cfg.Store.DeadLetterBySource(ctx, d.TenantID, from)
		switch {
		case err == nil:
			replayOf = id
		case !errors.Is(err, inspect.ErrNoSuchDeadLetter): // pruned: no link
			h.fail(w, r, err, false)
			return
		}
	}
	resentFrom, _ := d.ResentFrom() // a corrected record that failed again
	edits, err := h.cfg.Store.DeadLetterEdits(ctx, d.TenantID, d.ID)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	shown := make([]shownEdit, len(edits))
	for i, e := range edits {
		shown[i] = shownEdit{DeadLetterEdit: e, Written: written(e.Value), Period: writtenPeriod(e.Value)}
	}
	data := map[string]any{"Title": fmt.Sprintf("Dead letter %d", d.ID), "Nav": "dlq", "D": d, "ReplayOf": replayOf,
		"Value": showBytes(d.Value), "Key": showBytes(d.Key), "HasKey": d.Key != nil, "Headers": hs,
		"CanReplay": h.cfg.Replayer != nil, "Can": canOf(r), "ResentFrom": resentFrom, "Edits": shown,
		"CanResend": h.cfg.Resender != nil && d.Reason != message.ReasonBatchTooLarge, "Resent": r.URL.Query().Get("resent")}
	if failed != "" {
		data["ResendError"], data["Set"], data["Reason"] = failed, r.PostForm.Get("set"), r.PostForm.Get("reason")
	}
	h.renderCode(w, r, code, "deadletter", data)
}

// shownEdit is one correction of a letter as its page lists it.
type shownEdit struct {
	inspect.DeadLetterEdit
	Written writtenIdentity // the resent record's tenant and record id, for its explain link
	Period  string
}

// writtenPeriod is the account_period a record's value names, "" if none.
func writtenPeriod(value []byte) string {
	var f struct {
		Period any `json:"account_period"`
	}
	if json.Unmarshal(value, &f) != nil {
		return ""
	}
	p, _ := f.Period.(string)
	return p
}

// replaySelection is the dead letters a replay is about: named by id, or
// the page of those matching the list's filters.
func (h *handler) replaySelection(r *http.Request, q url.Values) ([]inspect.DeadLetter, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	if ids := q["id"]; len(ids) > 0 {
		if len(ids) > ReplayDeadLettersMax {
			return nil, settleBadFilter("%d dead letters: replay at most %d at a time", len(ids), ReplayDeadLettersMax)
		}
		out := make([]inspect.DeadLetter, 0, len(ids))
		seen := map[int64]bool{}
		for _, v := range ids {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return nil, settleBadFilter("dead letter id %q", v)
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			d, err := h.cfg.Store.DeadLetter(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, *d)
		}
		return out, nil
	}
	f, err := dlqFilter(q)
	if err != nil {
		return nil, err
	}
	f.Limit = ReplayDeadLettersMax
	return h.cfg.Store.DeadLetters(ctx, f)
}

// Replayed is what a replay did, or would do, with one dead letter.
type Replayed struct {
	ID     int64                `json:"id"`
	Reason string               `json:"reason"`
	From   message.Coordinates  `json:"from"`
	To     *message.Coordinates `json:"to,omitempty"` // absent on a dry run
}

// ReplayResult answers a replay.
type ReplayResult struct {
	DryRun   bool       `json:"dry_run"`
	Replayed []Replayed `json:"replayed"`
	Error    string     `json:"error,omitempty"` // a replay that stopped part way: Replayed holds what was produced
}

// ReplayRequest is the body of POST /api/dlq/replay.
type ReplayRequest struct {
	IDs    []int64 `json:"ids"`
	DryRun bool    `json:"dry_run"`
}

// errNoReplayer: this listener was started without a way to the broker.
var errNoReplayer = errors.New("replay is not available on this listener (no Kafka producer): use `settle dlq replay`")

// replay produces ds (unless dryRun) and says what it did.
func (h *handler) replay(r *http.Request, ds []inspect.DeadLetter, dryRun bool) (*ReplayResult, error) {
	res := &ReplayResult{DryRun: dryRun, Replayed: make([]Replayed, 0, len(ds))}
	for _, d := range ds {
		res.Replayed = append(res.Replayed, Replayed{ID: d.ID, Reason: d.Reason, From: d.Source})
	}
	if dryRun || len(ds) == 0 {
		return res, nil
	}
	if h.cfg.Replayer == nil {
		return nil, errNoReplayer
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	to, err := h.cfg.Replayer.Replay(ctx, ds)
	for i := range to {
		res.Replayed[i].To = &to[i]
	}
	if err != nil {
		// The error may be the broker's or the database's own text (its
		// SQL, its names): for the service log, not the page.
		h.log.Error("replay dead letters", "replayed", len(to), "of", len(ds), "analyst", analystOf(r), "err", err)
		res.Replayed = res.Replayed[:len(to)]
		res.Error = fmt.Sprintf("the replay stopped after %d of %d dead letters: the broker or the database refused the next "+
			"(the service log has the details); those listed were replayed, replay the others again", len(to), len(ds))
	} else {
		h.log.Info("replayed dead letters", "count", len(ds), "analyst", analystOf(r))
	}
	return res, nil
}

func (h *handler) apiReplay(w http.ResponseWriter, r *http.Request) {
	var in ReplayRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		h.fail(w, r, settleBadFilter("body: %v", err), true)
		return
	}
	if len(in.IDs) == 0 {
		h.fail(w, r, settleBadFilter("ids: name at least one dead letter"), true)
		return
	}
	q := url.Values{}
	for _, id := range in.IDs {
		q.Add("id", strconv.FormatInt(id, 10))
	}
	ds, err := h.replaySelection(r, q)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	res, err := h.replay(r, ds, in.DryRun)
	switch {
	case errors.Is(err, errNoReplayer):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	case err != nil:
		h.fail(w, r, err, true)
	case res.Error != "":
		writeJSON(w, http.StatusBadGateway, res)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// replayPreview is the dry run: what a replay of the selection would
// produce, with the form that confirms it.
func (h *handler) replayPreview(w http.ResponseWriter, r *http.Request) {
	ds, err := h.replaySelection(r, r.URL.Query())
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	data := map[string]any{"Title": "Replay dead letters", "Nav": "dlq", "DryRun": true, "DLQ": ds,
		"CanReplay": h.cfg.Replayer != nil, "Max": ReplayDeadLettersMax, "Filters": dlqFilterSummary(r.URL.Query()),
		"WillFail": willFailAgain(ds)}
	if q := r.URL.Query(); len(q["id"]) == 0 && len(ds) == ReplayDeadLettersMax {
		// Dead letters stay after a replay: the next ones are after the last.
		next := cloneValues(q)
		next.Set("after", strconv.FormatInt(ds[len(ds)-1].ID, 10))
		data["NextURL"] = "/dlq/replay?" + next.Encode()
	}
	h.render(w, r, "replay", data)
}

// replayForm is the confirmation: it replays exactly the ids the dry run
// listed, and shows where each landed.
func (h *handler) replayForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, settleBadFilter("form: %v", err), false)
		return
	}
	if len(r.PostForm["id"]) == 0 {
		h.fail(w, r, settleBadFilter("no dead letter to replay: start from the dry run"), false)
		return
	}
	ds, err := h.replaySelection(r, url.Values{"id": r.PostForm["id"]})
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	res, err := h.replay(r, ds, false)
	data := map[string]any{"Title": "Replay dead letters", "Nav": "dlq", "CanReplay": h.cfg.Replayer != nil}
	switch {
	case errors.Is(err, errNoReplayer):
		data["Error"], data["DLQ"], data["DryRun"] = err.Error(), ds, true
		h.renderCode(w, r, http.StatusServiceUnavailable, "replay", data)
	case err != nil:
		h.fail(w, r, err, false)
	case res.Error != "":
		data["Result"], data["Error"] = res, res.Error
		h.renderCode(w, r, http.StatusBadGateway, "replay", data)
	default:
		// Post/redirect/get: the result is a page of its own, read back
		// from where the replays were recorded, so a reload shows it
		// again instead of sending the letters twice.
		q := url.Values{}
		for _, d := range ds {
			q.Add("id", strconv.FormatInt(d.ID, 10))
		}
		http.Redirect(w, r, "/dlq/replayed?"+q.Encode(), http.StatusSeeOther)
	}
}

// replayedPage shows where the dead letters named by id were last sent
// back to: the replay form's result.
func (h *handler) replayedPage(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()["id"]) == 0 {
		h.fail(w, r, settleBadFilter("no dead letter named: /dlq/replayed?id=…"), false)
		return
	}
	ds, err := h.replaySelection(r, url.Values{"id": r.URL.Query()["id"]})
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	tos, err := h.cfg.Store.LastReplays(ctx, ds)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	res := &ReplayResult{Replayed: make([]Replayed, 0, len(ds))}
	for i, d := range ds {
		res.Replayed = append(res.Replayed, Replayed{ID: d.ID, Reason: d.Reason, From: d.Source, To: tos[i]})
	}
	h.renderCode(w, r, http.StatusOK, "replay", map[string]any{"Title": "Replayed dead letters", "Nav": "dlq",
		"CanReplay": h.cfg.Replayer != nil, "Result": res})
}

// willFailAgain counts the letters a replay would dead-letter again.
func willFailAgain(ds []inspect.DeadLetter) int {
	n := 0
	for _, d := range ds {
		if d.FailsAgain() {
			n++
		}
	}
	return n
}

// dlqFilterSummary says in words which filters a list has.
func dlqFilterSummary(q url.Values) string {
	var parts []string
	for _, k := range []string{"tenant", "reason", "topic", "error_class"} {
		if v := q.Get(k); v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	if len(q["id"]) > 0 {
		parts = append(parts, "id "+strings.Join(q["id"], ", "))
	}
	return strings.Join(parts, ", ")
}

// dlqFilterOf reads the dead-letter list's filters from r's query string.
func dlqFilterOf(r *http.Request) (inspect.DeadLetterFilter, error) { return dlqFilter(r.URL.Query()) }

// dlqFilter reads the dead-letter list's filters from a query string.
func dlqFilter(q url.Values) (inspect.DeadLetterFilter, error) {
	f := inspect.DeadLetterFilter{Tenant: q.Get("tenant"), Reason: q.Get("reason"), Topic: q.Get("topic"), ErrorClass: q.Get("error_class")}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return f, settleBadFilter("after %q", v)
		}
		f.AfterID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, settleBadFilter("limit %q", v)
		}
		f.Limit = n
	}
	return f, nil
}

// dlqReasons are the reasons the list's filter offers.
var dlqReasons = []string{"invalid_json", "too_large", "invalid_field", "transient_exhausted"}

func (h *handler) dlqPage(w http.ResponseWriter, r *http.Request) {
	f, ds, ok := load(h, w, r, false, dlqFilterOf, h.cfg.Store.DeadLetters)
	if !ok {
		return
	}
	q := r.URL.Query()
	// The replay starts where this page starts (its filters and after);
	// it takes at most ReplayDeadLettersMax, whatever the page's limit.
	base := cloneValues(q)
	base.Del("limit")
	data := map[string]any{"Title": "Dead letters", "Nav": "dlq", "DLQ": ds, "Q": q, "Reasons": dlqReasons,
		"ReplayURL": "/dlq/replay?" + base.Encode(), "CanReplay": h.cfg.Replayer != nil, "Max": ReplayDeadLettersMax,
		"Can": canOf(r)}
	if len(ds) > 0 && len(ds) == limitOr(f.Limit, 100) {
		next := cloneValues(q)
		next.Set("after", strconv.FormatInt(ds[len(ds)-1].ID, 10))
		data["NextURL"] = "/dlq?" + next.Encode()
	}
	h.render(w, r, "dlq", data)
}

// writtenIdentity is what a dead letter's value says of its tenant and
// record id, when it is a JSON object that names them as strings; "" for
// what it does not say. It is what the producer wrote, not what settle
// read: a letter is one because its record did not decode.
type writtenIdentity struct{ Tenant, Record string }

func written(value []byte) writtenIdentity {
	var fields struct {
		Tenant any `json:"tenant_id"`
		Record any `json:"record_id"`
	}
	if json.Unmarshal(value, &fields) != nil {
		return writtenIdentity{}
	}
	t, _ := fields.Tenant.(string)
	r, _ := fields.Record.(string)
	return writtenIdentity{t, r}
}

func limitOr(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
