package fingerprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/settlehq/settle/record"
)

const goldenMadePath = "testdata/golden_made.json"

// madeVector is the canonical form of an operation settle makes itself (no
// input record has its kind), so it is built from its identity fields
// rather than decoded.
type madeVector struct {
	Name   string `json:"name"`
	Note   string `json:"note,omitempty"`
	Record struct {
		TenantID      string      `json:"tenant_id"`
		AccountPeriod string      `json:"account_period"`
		RecordID      string      `json:"record_id"`
		Kind          record.Kind `json:"kind"`
	} `json:"record"`
	Canonical   string `json:"canonical"`
	Fingerprint string `json:"fingerprint"`
}

// TestGoldenMade checks the canonical forms of the operations settle makes:
// their bytes, and that the analysts' tools (CanonicalFields, Diff) read
// them back field for field.
func TestGoldenMade(t *testing.T) {
	b, err := os.ReadFile(goldenMadePath)
	if err != nil {
		t.Fatal(err)
	}
	var vs []madeVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatalf("%s: %v", goldenMadePath, err)
	}
	if len(vs) < 2 {
		t.Fatalf("%d vectors, want at least 2", len(vs))
	}
	for i := range vs {
		v := &vs[i]
		r := record.Record{TenantID: v.Record.TenantID, AccountPeriod: v.Record.AccountPeriod, RecordID: v.Record.RecordID, Kind: v.Record.Kind}
		c := Canonical(&r)
		fp := fmt.Sprintf("%016x", Sum(c))
		if *update {
			v.Canonical, v.Fingerprint = string(c), fp
		} else {
			if string(c) != v.Canonical {
				t.Errorf("%s: canonical\n got %s\nwant %s", v.Name, c, v.Canonical)
			}
			if fp != v.Fingerprint {
				t.Errorf("%s: fingerprint %s, want %s", v.Name, fp, v.Fingerprint)
			}
		}
		fields, err := CanonicalFields(c)
		if err != nil {
			t.Errorf("%s: CanonicalFields(%s): %v", v.Name, c, err)
			continue
		}
		want := map[string]string{"tenant_id": r.TenantID, "account_period": r.AccountPeriod, "record_id": r.RecordID, "kind": string(r.Kind)}
		for k, w := range want {
			if fields[k] != w {
				t.Errorf("%s: field %s = %q, want %q", v.Name, k, fields[k], w)
			}
		}
		if len(fields) != len(want) {
			t.Errorf("%s: fields %v, want exactly %v", v.Name, fields, want)
		}
		other := r
		other.RecordID += "x"
		diff, err := Diff(c, Canonical(&other))
		if err != nil {
			t.Errorf("%s: Diff: %v", v.Name, err)
		} else if len(diff) != 1 || diff[0].Field != "record_id" {
			t.Errorf("%s: Diff = %+v, want one difference in record_id", v.Name, diff)
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
		if err := os.WriteFile(goldenMadePath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
