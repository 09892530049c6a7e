package fingerprint

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/settlehq/settle/record"
)

// FuzzCanonical decodes arbitrary bytes, with CloudEvents headers built from
// the fuzzer's text. Decode must never panic and must return only
// *DecodeError (record.FuzzDecode, seeded with the malformed inputs, checks
// that too); whatever decodes must have a canonical form that decodes to
// the same canonical form, and a deterministic fingerprint.
func FuzzCanonical(f *testing.F) {
	for _, v := range loadGolden(f) {
		value, headers := v.input()
		f.Add(value, encodeHeaders(headers))
	}
	d, err := record.NewDecoder(record.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte, headerText string) {
		headers := decodeHeaders(headerText)
		r, err := d.Decode(value, headers)
		if err != nil {
			var de *record.DecodeError
			if !errors.As(err, &de) || de.Reason == "" || de.Field == "" || de.Msg == "" {
				t.Fatalf("error %T %q is not a complete *DecodeError", err, err)
			}
			return
		}
		c := Canonical(&r)
		if !bytes.Equal(c, Canonical(&r)) || Sum(c) != Sum(bytes.Clone(c)) {
			t.Fatal("canonical form or sum not deterministic")
		}
		r2, err := decodeCanonical(d, c, &r)
		if err != nil {
			t.Fatalf("canonical form %s does not decode: %v", c, err)
		}
		if c2 := Canonical(&r2); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form unstable:\n%s\n%s", c, c2)
		}
		if _, err := CanonicalFields(c); err != nil {
			t.Fatalf("CanonicalFields(%s): %v", c, err)
		}
	})
}

// Headers travel through the fuzzer as "key=value" lines.
func encodeHeaders(hs []record.Header) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Key)
		b.WriteByte('=')
		b.Write(h.Value)
		b.WriteByte('\n')
	}
	return b.String()
}

func decodeHeaders(s string) []record.Header {
	var hs []record.Header
	for line := range strings.Lines(s) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		hs = append(hs, record.Header{Key: k, Value: []byte(v)})
	}
	return hs
}

// typicalUsage is a ~300-byte usage record, as producers send them.
const typicalUsage = `{"tenant_id":"acme","account_period":"2026-11","record_id":"job-7f3a9c2e-41d5-4b8e-9a61-0c2f5e8d1b47","kind":"usage","subject":"acct-000042","amount":"12.345","currency":"USD","meter":"gpu_seconds","quantity":"3600.5","unit":"s","occurred_at":"2026-11-05T11:04:05.123Z","finalization_version":1,"source":"metering-agent","attributes":{"region":"eu-west-1"}}`

func BenchmarkCanonical(b *testing.B) {
	d := newTestDecoder(b)
	r, err := d.Decode([]byte(typicalUsage), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		Sum(Canonical(&r))
	}
}
