package fingerprint

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/settlehq/settle/record"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json with the current canonical forms and fingerprints")

const goldenPath = "testdata/golden.json"

// goldenVector is one input with its expected canonical form and
// fingerprint. value is the record as JSON, or value_text its exact bytes
// when the bytes themselves matter (whitespace, escapes). same_as names
// another vector that must have the same canonical form: the claims of the
// contract ("40" and "4E1" are one amount) are checked independently of the
// recorded bytes, so -update cannot silently bless a regression of them.
type goldenVector struct {
	Name        string          `json:"name"`
	Note        string          `json:"note,omitempty"`
	Headers     [][2]string     `json:"headers,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueText   *string         `json:"value_text,omitempty"`
	SameAs      string          `json:"same_as,omitempty"`
	Canonical   string          `json:"canonical"`
	Fingerprint string          `json:"fingerprint"`
}

func (v *goldenVector) input() ([]byte, []record.Header) {
	value := []byte(v.Value)
	if v.ValueText != nil {
		value = []byte(*v.ValueText)
	}
	var headers []record.Header
	for _, h := range v.Headers {
		headers = append(headers, record.Header{Key: h[0], Value: []byte(h[1])})
	}
	return value, headers
}

func loadGolden(t testing.TB) []goldenVector {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var vs []goldenVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	return vs
}

func TestGolden(t *testing.T) {
	vs := loadGolden(t)
	if len(vs) < 25 {
		t.Fatalf("%d golden vectors, want at least 25", len(vs))
	}
	d := newTestDecoder(t)
	canon := map[string]string{}
	kinds := map[record.Kind]bool{}
	for i := range vs {
		v := &vs[i]
		value, headers := v.input()
		r, err := d.Decode(value, headers)
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		kinds[r.Kind] = true
		c := Canonical(&r)
		fp := fmt.Sprintf("%016x", Sum(c))
		canon[v.Name] = string(c)
		if *update {
			v.Canonical, v.Fingerprint = string(c), fp
			continue
		}
		if string(c) != v.Canonical {
			t.Errorf("%s: canonical\n got %s\nwant %s", v.Name, c, v.Canonical)
		}
		if fp != v.Fingerprint {
			t.Errorf("%s: fingerprint %s, want %s", v.Name, fp, v.Fingerprint)
		}
	}
	for _, v := range vs {
		if v.SameAs == "" {
			continue
		}
		other, ok := canon[v.SameAs]
		if !ok {
			t.Errorf("%s: same_as names unknown vector %q", v.Name, v.SameAs)
		} else if canon[v.Name] != other {
			t.Errorf("%s: canonical differs from %s's:\n%s\n%s", v.Name, v.SameAs, canon[v.Name], other)
		}
	}
	for _, k := range record.Kinds {
		if !kinds[k] {
			t.Errorf("no golden vector of kind %s", k)
		}
	}
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		if err := enc.Encode(vs); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(goldenPath), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s with %d vectors", goldenPath, len(vs))
	}
}

func newTestDecoder(t testing.TB) *record.Decoder {
	t.Helper()
	d, err := record.NewDecoder(record.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
