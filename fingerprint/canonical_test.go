package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/settlehq/settle/record"
)

// decodeCanonical decodes a canonical form as an input record. Refund,
// reclaim and hold_release fingerprint only their identity, but subject and
// occurred_at are required inputs for every kind, so for them the record's
// own subject and time are added: the canonical form is then still decoded
// field for field.
func decodeCanonical(d *record.Decoder, c []byte, r *record.Record) (record.Record, error) {
	switch r.Kind {
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease:
		extra := `{"subject":` + jsonString(r.Subject) + `,"occurred_at":"` + string(appendRFC3339(nil, r.OccurredAt)) + `",`
		c = append([]byte(extra), c[1:]...)
	}
	return d.Decode(c, nil)
}

// usageJSON is a valid usage record.
const usageJSON = `{"tenant_id":"acme","account_period":"2026-11","record_id":"u-1","kind":"usage","subject":"acct-42","amount":"40","currency":"USD","meter":"gpu_seconds","quantity":"3600","unit":"s","occurred_at":"2026-11-05T11:04:05Z","finalization_version":1}`

// with replaces one field of usageJSON (old is the exact `"key":value` text).
func with(old, new string) string {
	if !strings.Contains(usageJSON, old) {
		panic("usageJSON has no " + old)
	}
	return strings.Replace(usageJSON, old, new, 1)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCanonicalIsStableAndSorted(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	for _, v := range loadGolden(t) {
		value, headers := v.input()
		r, err := d.Decode(value, headers)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		c := Canonical(&r)
		r2, err := decodeCanonical(d, c, &r)
		if err != nil {
			t.Fatalf("%s: canonical form %s does not decode: %v", v.Name, c, err)
		}
		if c2 := Canonical(&r2); !bytes.Equal(c, c2) {
			t.Errorf("%s: canonical(canonical(x)) != canonical(x):\n%s\n%s", v.Name, c, c2)
		}
		// Keys sorted bytewise, compact, and equal to what encoding/json
		// makes of the same fields (it sorts map keys).
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(c))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		if got := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, c) {
			t.Errorf("%s: canonical form is not sorted compact JSON:\n%s\n%s", v.Name, c, got)
		}
		for k := range m {
			if k == "source" || k == "attributes" {
				t.Errorf("%s: %s is fingerprinted", v.Name, k)
			}
		}
	}
}

func TestCanonicalAt(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	r, err := d.Decode([]byte(usageJSON), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CanonicalAt(1, &r)
	if err != nil || !bytes.Equal(c, Canonical(&r)) {
		t.Fatalf("CanonicalAt(1) = %s, %v", c, err)
	}
	for _, v := range []int{0, 2, -1} {
		if _, err := CanonicalAt(v, &r); err == nil || !strings.Contains(err.Error(), "unknown canonical version") {
			t.Errorf("CanonicalAt(%d): %v", v, err)
		}
	}
	if Sum(c) != Sum(append([]byte(nil), c...)) || Sum(c) == Sum(append(c[:len(c):len(c)], ' ')) {
		t.Error("Sum is not a function of the bytes")
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	decode := func(s string) []byte {
		r, err := d.Decode([]byte(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		return Canonical(&r)
	}
	stored := decode(usageJSON)
	incoming := decode(with(`"amount":"40"`, `"amount":"41.50"`))
	incoming2 := decode(with(`"unit":"s"`, `"unit":"ms","hold_id":"h-\"1\""`))

	got, err := Diff(stored, incoming)
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldDiff{{Field: "amount", Stored: "40", Incoming: "41.5"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %+v, want %+v", got, want)
	}

	got, err = Diff(stored, incoming2)
	if err != nil {
		t.Fatal(err)
	}
	want = []FieldDiff{{Field: "hold_id", Stored: "", Incoming: `h-"1"`}, {Field: "unit", Stored: "s", Incoming: "ms"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %+v, want %+v", got, want)
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Field < got[j].Field }) {
		t.Error("not sorted")
	}

	if got, err := Diff(stored, stored); err != nil || len(got) != 0 {
		t.Errorf("Diff of equal forms = %+v, %v", got, err)
	}
	// Absent on the stored side shows "" there.
	got, err = Diff(incoming2, stored)
	if err != nil || got[0] != (FieldDiff{Field: "hold_id", Stored: `h-"1"`, Incoming: ""}) {
		t.Errorf("reverse Diff = %+v, %v", got, err)
	}
	if _, err := Diff([]byte(`{"a":1,"a":2}`), stored); err == nil {
		t.Error("Diff accepted a form with duplicate keys")
	}
	if _, err := Diff(stored, []byte(`not json`)); err == nil {
		t.Error("Diff accepted garbage")
	}

	fields, err := CanonicalFields(stored)
	if err != nil || fields["finalization_version"] != "1" || fields["occurred_at"] != "2026-11-05T11:04:05Z" || len(fields) != 12 {
		t.Errorf("CanonicalFields = %v, %v", fields, err)
	}
	var de *record.DecodeError
	if _, err := CanonicalFields([]byte(`{"a":1} x`)); !errors.As(err, &de) {
		t.Errorf("CanonicalFields with trailing data: %v", err)
	}
}

// Every field material to a kind changes its canonical form; the
// immaterial ones do not.
func TestCanonicalMaterialFields(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	base, err := d.Decode([]byte(usageJSON), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Canonical(&base)
	for _, change := range [][2]string{
		{`"tenant_id":"acme"`, `"tenant_id":"acme2"`},
		{`"account_period":"2026-11"`, `"account_period":"2026-12"`},
		{`"record_id":"u-1"`, `"record_id":"u-2"`},
		{`"subject":"acct-42"`, `"subject":"acct-43"`},
		{`"amount":"40"`, `"amount":"40.000000001"`},
		{`"currency":"USD"`, `"currency":"EUR"`},
		{`"meter":"gpu_seconds"`, `"meter":"cpu_seconds"`},
		{`"quantity":"3600"`, `"quantity":"3601"`},
		{`"unit":"s"`, `"unit":"ms"`},
		{`"occurred_at":"2026-11-05T11:04:05Z"`, `"occurred_at":"2026-11-05T11:04:05.000000001Z"`},
		{`"finalization_version":1`, `"finalization_version":2`},
		{`"unit":"s"`, `"unit":"s","hold_id":"h"`},
	} {
		r, err := d.Decode([]byte(with(change[0], change[1])), nil)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(Canonical(&r), c) {
			t.Errorf("%s is not material", change[1])
		}
	}
}
