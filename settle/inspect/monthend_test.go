package inspect_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/sourcefile"
)

// month is a generated month of one tenant's records, settled through
// Store.Settle, and the records as the metering system produced them.
type month struct {
	s        *settle.Store
	produced []map[string]any // in the order produced
}

const (
	monthSubjects = 8
	monthUsages   = 14
)

// newMonth generates and settles acme's 2026-11: per subject a grant,
// usages on two meters, corrections (some twice), refunds, refund-then-
// reclaim pairs, a captured hold, a released hold, and one subject's hold
// that expires; one subject is in EUR.
func newMonth(t *testing.T) *month {
	t.Helper()
	m := &month{s: settletest.NewStore(t, settle.Config{})}
	usage := func(s, id, amount, meter string, kv ...any) map[string]any {
		cur := "USD"
		if s == "cust-7" {
			cur = "EUR"
		}
		r := settletest.Rec(append([]any{"record_id", id, "subject", s, "amount", amount, "currency", cur, "meter", meter, "quantity", amount}, kv...)...)
		return r
	}
	var first, second []map[string]any
	var (
		expiring  map[string]any
		expiresAt time.Time
	)
	for i := range monthSubjects {
		s := fmt.Sprintf("cust-%d", i)
		g := settletest.Grant("g-"+s, s, "1000")
		h := settletest.Rec("record_id", "h-cap-"+s, "kind", "hold", "subject", s, "amount", "50", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
		hr := settletest.Clone(h, "record_id", "h-rel-"+s, "amount", "20")
		if s == "cust-7" {
			g["currency"], h["currency"], hr["currency"] = "EUR", "EUR", "EUR"
		}
		first = append(first, g, h, hr)
		if i == 2 {
			expiresAt = time.Now().Add(1500 * time.Millisecond)
			expiring = settletest.Clone(h, "record_id", "h-exp-"+s, "amount", "15", "expires_at", expiresAt.UTC().Format(time.RFC3339Nano))
			first = append(first, expiring)
		}
		for j := range monthUsages {
			meter := "gpu_seconds"
			if j%2 == 1 {
				meter = "storage_gb"
			}
			id := fmt.Sprintf("u-%s-%d", s, j)
			first = append(first, usage(s, id, fmt.Sprint(j+1), meter))
			switch {
			case j%5 == 0:
				second = append(second, usage(s, "c1-"+id, fmt.Sprint(2*j+3), meter, "kind", "correction", "corrects", id, "finalization_version", 2))
				if j%10 == 0 {
					second = append(second, usage(s, "c2-"+id, fmt.Sprint(j+2), meter, "kind", "correction", "corrects", "c1-"+id, "finalization_version", 3))
				}
			case j%7 == 3:
				second = append(second, settletest.Signal("refund", id, s))
			case j%7 == 4:
				second = append(second, settletest.Signal("refund", id, s), settletest.Signal("reclaim", id, s))
			}
		}
		capture := usage(s, "u-cap-"+s, "30", "gpu_seconds", "hold_id", "h-cap-"+s)
		release := settletest.Signal("hold_release", "h-rel-"+s, s)
		second = append(second, capture, release)
	}
	m.produced = append(first, second...)
	ctx := context.Background()
	for i := 0; i < len(m.produced); i += 500 {
		part := m.produced[i:min(i+500, len(m.produced))]
		rs := settletest.MustSettle(t, m.s, settletest.Batch(0, int64(i), part...))
		for j, r := range rs {
			if r.Outcome != message.OutcomeSettled {
				t.Fatalf("month record %v: %s %s", part[j]["record_id"], r.Outcome, r.Reason)
			}
		}
	}
	time.Sleep(time.Until(expiresAt) + 100*time.Millisecond)
	if n, err := m.s.ExpireHolds(ctx); err != nil || n != 1 {
		t.Fatalf("expire holds: %d, %v (want the one hold expired)", n, err)
	}
	return m
}

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

func checkSource(t *testing.T, s *settle.Store, format string, src []byte) *inspect.SourceReport {
	t.Helper()
	dec, err := record.NewDecoder(record.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := sourcefile.New(bytes.NewReader(src), format, dec, 0)
	if err != nil {
		t.Fatal(err)
	}
	var progress []inspect.SourceProgress
	r, err := inspect.New(s).CheckSource(context.Background(), inspect.SourceCheckInput{TenantID: "acme", From: "2026-11", ProgressEvery: 100,
		Progress: func(p inspect.SourceProgress) { progress = append(progress, p) }}, rd)
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
	m := newMonth(t)
	// Another tenant's records in the same file are out of scope.
	other := settletest.Clone(m.produced[0], "tenant_id", "globex")
	exports := map[string][]byte{
		sourcefile.FormatJSONLines:   lines(append(m.produced, other)),
		sourcefile.FormatCSV:         asCSV(m.produced),
		sourcefile.FormatCloudEvents: asCloudEvents(m.produced),
	}
	for format, src := range exports {
		r := checkSource(t, m.s, sourcefile.FormatAuto, src)
		if !r.Agrees() {
			b, _ := json.MarshalIndent(r, "", " ")
			t.Errorf("%s: the export of what was produced does not agree:\n%s", format, b)
			continue
		}
		if len(r.Periods) != 1 || r.Periods[0].Identities != int64(len(m.produced)) || r.Periods[0].Matched != int64(len(m.produced)) {
			t.Errorf("%s: periods %+v, want %d identities all matched", format, r.Periods, len(m.produced))
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
	m := newMonth(t)
	ctx := context.Background()
	waiting := settletest.Rec("record_id", "c-wait", "kind", "correction", "corrects", "u-from-october", "corrects_period", "2026-10",
		"subject", "cust-1", "amount", "9", "finalization_version", 2)
	quarantined := settletest.Rec("record_id", "c-conflict", "kind", "correction", "corrects", "u-cust-1-1", "subject", "cust-1", "amount", "1.5",
		"finalization_version", 1) // equal to the chain's version: version_conflict
	dead := settletest.Rec("record_id", "u-dead", "subject", "cust-1", "amount", "4")
	ins := settletest.Batch(1, 0, waiting, quarantined, dead)
	ins[2].Exhausted = &message.Exhausted{Err: "connection reset", Attempts: 9}
	got := settletest.Outcomes(settletest.MustSettle(t, m.s, ins))
	if strings.Join(got, " ") != "waiting quarantined:version_conflict dead_lettered:transient_exhausted" {
		t.Fatalf("setup outcomes: %v", got)
	}

	var src []map[string]any
	for _, r := range m.produced {
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
	r := checkSource(t, m.s, sourcefile.FormatJSONLines, lines(src))

	type want struct{ class, record, seen, reason string }
	var gotF []want
	for _, f := range r.Findings {
		gotF = append(gotF, want{f.Class, f.RecordID, f.Seen, f.Reason})
	}
	wantF := []want{
		{inspect.ClassSourceDifferent, "u-cust-4-2", "", ""},
		{inspect.ClassSourceExtra, "u-cust-3-1", "", ""},
		{inspect.ClassSourceMissing, "c-wait", inspect.SeenWaiting, ""},
		{inspect.ClassSourceMissing, "c-conflict", inspect.SeenQuarantined, message.ReasonVersionConflict},
		{inspect.ClassSourceMissing, "u-dead", inspect.SeenDeadLettered, message.ReasonTransientExhausted},
		{inspect.ClassSourceMissing, "u-never-sent", inspect.SeenNever, ""},
		{inspect.ClassSourceNetDiffers, "u-cust-4-2", "", ""},
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
		case f.Class == inspect.ClassSourceDifferent && (len(f.Diff) != 1 || f.Diff[0] != inspect.FieldDiff{Field: "amount", Settle: "3", Source: "3.5"}):
			t.Errorf("diff of the changed record: %+v, want amount 3 -> 3.5", f.Diff)
		case f.Class == inspect.ClassSourceNetDiffers && (f.SourceAmount != "3.5" || f.SettleAmount != "3"):
			t.Errorf("net charge finding: source %s, settle %s, want 3.5 and 3", f.SourceAmount, f.SettleAmount)
		case f.Seen == inspect.SeenQuarantined && f.CaseID == 0:
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
	if n := settletest.Count(t, m.s.Pool(), `SELECT count(*) FROM identities WHERE record_id = 'u-never-sent'`); n != 0 {
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
	r := checkSource(t, s, sourcefile.FormatJSONLines, src)
	if r.Counts[inspect.ClassSourceInvalid] != 1 || r.Counts[inspect.ClassSourceContradicts] != 1 || len(r.Counts) != 2 {
		t.Errorf("counts %v, want one invalid line and one contradiction", r.Counts)
	}
	for _, f := range r.Findings {
		if (f.Class == inspect.ClassSourceInvalid && f.Line != 3) || (f.Class == inspect.ClassSourceContradicts && f.Line != 2) {
			t.Errorf("finding at the wrong line: %+v", f)
		}
	}
	dec, _ := record.NewDecoder(record.Config{})
	// The misspelt column is the point: it names no record field.
	if _, err := sourcefile.New(strings.NewReader("tenant_id,ammount\nacme,1\n"), sourcefile.FormatCSV, dec, 0); err == nil { //nolint:misspell // deliberate
		t.Error("a CSV header with a field that is no record field was accepted")
	}
}

// TestReadSideCannotWrite: the month-end reads run under settle_reader in
// a READ ONLY transaction; a write there fails, and the role alone could
// not write either.
func TestReadSideCannotWrite(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	var user string
	err := inspect.ReadOnlyTx(inspect.New(s), ctx, "test", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO periods (tenant_id, account_period) VALUES ('acme', '2026-11')`)
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("a write in the read path: %v, want read_only_sql_transaction (25006)", err)
	}
	if user != inspect.ReaderRole {
		t.Errorf("the read path runs as %q, want %s", user, inspect.ReaderRole)
	}
	// The role by itself, in a read-write transaction: no privilege.
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+inspect.ReaderRole); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO periods (tenant_id, account_period) VALUES ('acme', '2026-11')`)
		return err
	})
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("a write as %s: %v, want insufficient_privilege (42501)", inspect.ReaderRole, err)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM periods`); n != 0 {
		t.Errorf("%d periods written", n)
	}
}
