package record

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecode decodes arbitrary bytes, with CloudEvents headers built from
// the fuzzer's text. Decode must never panic and must return only a
// complete *DecodeError. What decodes is taken further by
// fingerprint.FuzzCanonical.
func FuzzDecode(f *testing.F) {
	for _, v := range []string{usageJSON, reversalJSON, holdJSON} {
		f.Add([]byte(v), "")
	}
	for _, tc := range malformedCases {
		if len(tc.value) <= 4096 {
			f.Add([]byte(tc.value), encodeHeaders(tc.headers))
		}
	}
	d, err := NewDecoder(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte, headerText string) {
		headers := decodeHeaders(headerText)
		if _, err := d.Decode(value, headers); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Reason == "" || de.Field == "" || de.Msg == "" {
				t.Fatalf("error %T %q is not a complete *DecodeError", err, err)
			}
		}
	})
}

// Headers travel through the fuzzer as "key=value" lines.
func encodeHeaders(hs []Header) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Key)
		b.WriteByte('=')
		b.Write(h.Value)
		b.WriteByte('\n')
	}
	return b.String()
}

func decodeHeaders(s string) []Header {
	var hs []Header
	for line := range strings.Lines(s) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		hs = append(hs, Header{Key: k, Value: []byte(v)})
	}
	return hs
}

// typicalUsage is a ~300-byte usage record, as producers send them.
const typicalUsage = `{"tenant_id":"acme","account_period":"2026-11","record_id":"job-7f3a9c2e-41d5-4b8e-9a61-0c2f5e8d1b47","kind":"usage","subject":"acct-000042","amount":"12.345","currency":"USD","meter":"gpu_seconds","quantity":"3600.5","unit":"s","occurred_at":"2026-11-05T11:04:05.123Z","finalization_version":1,"source":"metering-agent","attributes":{"region":"eu-west-1"}}`

func BenchmarkDecode(b *testing.B) {
	d := newTestDecoder(b)
	value := []byte(typicalUsage)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(value, nil); err != nil {
			b.Fatal(err)
		}
	}
}
