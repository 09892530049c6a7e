package reconcile_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/settletest"
)

// lines renders records as JSON lines.
func lines(recs []map[string]any) []byte {
	var b bytes.Buffer
	for _, r := range recs {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// asCSV renders records as CSV with a header of every field they use.
func asCSV(recs []map[string]any) []byte {
	names := map[string]bool{}
	for _, r := range recs {
		for k := range r {
			names[k] = true
		}
	}
	var head []string
	for k := range names {
		head = append(head, k)
	}
	sort.Strings(head)
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(head)
	for _, r := range recs {
		row := make([]string, len(head))
		for i, k := range head {
			if v, ok := r[k]; ok {
				row[i] = fmt.Sprint(v)
			}
		}
		_ = w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}

// asCloudEvents renders records as a batch of structured CloudEvents.
func asCloudEvents(recs []map[string]any) []byte {
	var evs []map[string]any
	for _, r := range recs {
		data := settletest.Clone(r, "tenant_id", nil, "record_id", nil, "kind", nil, "subject", nil, "occurred_at", nil)
		evs = append(evs, map[string]any{"specversion": "1.0", "id": r["record_id"], "source": "metering", "type": "com.example.metering." + r["kind"].(string),
			"subject": r["subject"], "time": r["occurred_at"], "tenantid": r["tenant_id"], "datacontenttype": "application/json", "data": data})
	}
	b, _ := json.Marshal(evs)
	return b
}

func checkSource(t *testing.T, s *settle.Store, format string, src []byte) *reconcile.SourceReport {
	t.Helper()
	dec, err := record.NewDecoder(record.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := reconcile.NewSourceReader(bytes.NewReader(src), format, dec, 0)
	if err != nil {
		t.Fatal(err)
	}
	var progress []reconcile.SourceProgress
	r, err := reconcile.CheckSource(context.Background(), s, reconcile.SourceCheckInput{TenantID: "acme", From: "2026-11", ProgressEvery: 100,
		Progress: func(p reconcile.SourceProgress) { progress = append(progress, p) }}, rd)
	if err != nil {
		t.Fatalf("check source: %v", err)
	}
	if len(progress) == 0 || !progress[len(progress)-1].Done || progress[len(progress)-1].Lines != r.Lines {
		t.Errorf("progress: %+v, want a last report of %d lines, done", progress, r.Lines)
	}
	return r
}

// TestSourceCheckAgrees: the metering system's export of exactly what it
// produced (as JSON lines, as CSV, as CloudEvents) agrees with what settle
// holds, totals included.
func TestSourceCheckAgrees(t *testing.T) {
	t.Parallel()
	m := settletest.NewMonth(t)
	// Another tenant's records in the same file are out of scope.
	other := settletest.Clone(m.Produced[0], "tenant_id", "globex")
	exports := map[string][]byte{
		reconcile.SourceFormatJSONLines:   lines(append(m.Produced, other)),
		reconcile.SourceFormatCSV:         asCSV(m.Produced),
		reconcile.SourceFormatCloudEvents: asCloudEvents(m.Produced),
	}
	for format, src := range exports {
		r := checkSource(t, m.Store, reconcile.SourceFormatAuto, src)
		if !r.Agrees() {
			b, _ := json.MarshalIndent(r, "", " ")
			t.Errorf("%s: the export of what was produced does not agree:\n%s", format, b)
			continue
		}
		if len(r.Periods) != 1 || r.Periods[0].Identities != int64(len(m.Produced)) || r.Periods[0].Matched != int64(len(m.Produced)) {
			t.Errorf("%s: periods %+v, want %d identities all matched", format, r.Periods, len(m.Produced))
		}
		if len(r.Totals) != 2 || r.Totals[0].Source == "0" || r.Totals[0].Source != r.Totals[0].Settle {
			t.Errorf("%s: totals %+v, want USD and EUR, equal and not zero", format, r.Totals)
		}
	}
}

// TestSourceCheckReportsEachDifference: the same export with one record
// dropped, one added and one amount changed, and with three records that
// settle did not settle (one waiting for its target, one quarantined, one
// dead-lettered), reports exactly those, each with its reason, and totals
// that differ by exactly their amounts.
func TestSourceCheckReportsEachDifference(t *testing.T) {
	t.Parallel()
	m := settletest.NewMonth(t)
	ctx := context.Background()
	waiting := settletest.Rec("record_id", "c-wait", "kind", "correction", "corrects", "u-from-october", "corrects_period", "2026-10",
		"subject", "cust-1", "amount", "9", "finalization_version", 2)
	quarantined := settletest.Rec("record_id", "c-conflict", "kind", "correction", "corrects", "u-cust-1-1", "subject", "cust-1", "amount", "1.5",
		"finalization_version", 1) // equal to the chain's version: version_conflict
	dead := settletest.Rec("record_id", "u-dead", "subject", "cust-1", "amount", "4")
	ins := settletest.Batch(1, 0, waiting, quarantined, dead)
	ins[2].Exhausted = &message.Exhausted{Err: "connection reset", Attempts: 9}
	got := settletest.Outcomes(settletest.MustSettle(t, m.Store, ins))
	if strings.Join(got, " ") != "waiting quarantined:version_conflict dead_lettered:transient_exhausted" {
		t.Fatalf("setup outcomes: %v", got)
	}

	var src []map[string]any
	for _, r := range m.Produced {
		switch r["record_id"] {
		case "u-cust-3-1": // dropped: settled, absent from the source
			continue
		case "u-cust-4-2": // changed
			r = settletest.Clone(r, "amount", "3.5")
		}
		src = append(src, r)
	}
	added := settletest.Rec("record_id", "u-never-sent", "subject", "cust-5", "amount", "6")
	src = append(src, added, waiting, quarantined, dead)
	r := checkSource(t, m.Store, reconcile.SourceFormatJSONLines, lines(src))

	type want struct{ class, record, seen, reason string }
	var gotF []want
	for _, f := range r.Findings {
		gotF = append(gotF, want{f.Class, f.RecordID, f.Seen, f.Reason})
	}
	wantF := []want{
		{reconcile.ClassSourceDifferent, "u-cust-4-2", "", ""},
		{reconcile.ClassSourceExtra, "u-cust-3-1", "", ""},
		{reconcile.ClassSourceMissing, "c-wait", reconcile.SeenWaiting, ""},
		{reconcile.ClassSourceMissing, "c-conflict", reconcile.SeenQuarantined, message.ReasonVersionConflict},
		{reconcile.ClassSourceMissing, "u-dead", reconcile.SeenDeadLettered, message.ReasonTransientExhausted},
		{reconcile.ClassSourceMissing, "u-never-sent", reconcile.SeenNever, ""},
		{reconcile.ClassSourceNetDiffers, "u-cust-4-2", "", ""},
	}
	sortW := func(ws []want) {
		sort.Slice(ws, func(i, j int) bool { return ws[i].class+ws[i].record < ws[j].class+ws[j].record })
	}
	sortW(gotF)
	sortW(wantF)
	if fmt.Sprint(gotF) != fmt.Sprint(wantF) {
		b, _ := json.MarshalIndent(r.Findings, "", " ")
		t.Errorf("findings\n got %v\nwant %v\n%s", gotF, wantF, b)
	}
	for _, f := range r.Findings {
		switch {
		case f.Class == reconcile.ClassSourceDifferent && (len(f.Diff) != 1 || f.Diff[0] != reconcile.FieldDiff{Field: "amount", Settle: "3", Source: "3.5"}):
			t.Errorf("diff of the changed record: %+v, want amount 3 -> 3.5", f.Diff)
		case f.Class == reconcile.ClassSourceNetDiffers && (f.SourceAmount != "3.5" || f.SettleAmount != "3"):
			t.Errorf("net charge finding: source %s, settle %s, want 3.5 and 3", f.SourceAmount, f.SettleAmount)
		case f.Seen == reconcile.SeenQuarantined && f.CaseID == 0:
			t.Errorf("the quarantined record's finding names no case: %+v", f)
		}
	}
	if r.Agrees() {
		t.Error("a disagreeing export agrees")
	}
	// settle - source, USD: +2 (dropped u-cust-3-1) -0.5 (changed) -6
	// (added) -4 (dead-lettered); EUR agrees.
	diffs := map[string]string{}
	for _, tot := range r.Totals {
		diffs[tot.Currency] = tot.Difference
	}
	if diffs["USD"] != "-8.5" || diffs["EUR"] != "0" {
		t.Errorf("total differences %v, want USD -8.5, EUR 0 (%+v)", diffs, r.Totals)
	}
	// Nothing was written: the check only reads.
	if n := settletest.Count(t, m.Store.Pool(), `SELECT count(*) FROM identities WHERE record_id = 'u-never-sent'`); n != 0 {
		t.Errorf("the check wrote %d identities", n)
	}
	_ = ctx
}

// TestSourceInvalidLines: a source line that does not decode, and a line
// that repeats an identity with another payload, are findings with their
// line numbers; CSV with an unknown column is refused up front.
func TestSourceInvalidLines(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	u := settletest.Rec()
	settletest.MustSettle(t, s, settletest.Batch(0, 0, u))
	src := lines([]map[string]any{u, settletest.Clone(u, "amount", "41")})
	src = append(src, []byte("{not json\n")...)
	r := checkSource(t, s, reconcile.SourceFormatJSONLines, src)
	if r.Counts[reconcile.ClassSourceInvalid] != 1 || r.Counts[reconcile.ClassSourceContradicts] != 1 || len(r.Counts) != 2 {
		t.Errorf("counts %v, want one invalid line and one contradiction", r.Counts)
	}
	for _, f := range r.Findings {
		if (f.Class == reconcile.ClassSourceInvalid && f.Line != 3) || (f.Class == reconcile.ClassSourceContradicts && f.Line != 2) {
			t.Errorf("finding at the wrong line: %+v", f)
		}
	}
	dec, _ := record.NewDecoder(record.Config{})
	// The misspelt column is the point: it names no record field.
	if _, err := reconcile.NewSourceReader(strings.NewReader("tenant_id,ammount\nacme,1\n"), reconcile.SourceFormatCSV, dec, 0); err == nil { //nolint:misspell // deliberate
		t.Error("a CSV header with a field that is no record field was accepted")
	}
}
