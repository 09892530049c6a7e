package fingerprint

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/record"
)

// CanonicalVersion is the version of the canonical form Canonical writes.
// Stored fingerprints keep the version they were made with, and an incoming
// record is compared in the stored record's version (CanonicalAt), so that a
// new version never turns old retries into conflicts. A change to the bytes
// Canonical writes for any record must add a version, never edit one.
const CanonicalVersion = 1

// Canonical returns the canonical form, in version CanonicalVersion, of the
// material fields of r: what decides whether two records with one identity
// are a retry or a conflict.
//
// Version 1 is a compact JSON object with keys sorted bytewise, holding
// exactly the material fields of r's kind (every field of the contract's
// table except source and attributes; only tenant_id, account_period,
// record_id and kind for refund, reclaim and hold_release), absent optional
// fields omitted, decimals in their normal form, times in UTC with a
// fraction only when non-zero, and finalization_version as a JSON integer.
// Strings escape only '"' and '\'; validated records hold no control
// characters, and everything else is written as UTF-8. Because it uses the
// input's field names and forms, the canonical form of a kind other than
// refund, reclaim and hold_release is itself a valid input record that
// decodes to the same canonical form.
func Canonical(r *record.Record) []byte {
	b := make([]byte, 0, 384)
	b = append(b, '{')
	w := canonWriter{b: b}
	material := materialFields(r.Kind)
	has := func(f record.Field) bool { return material.Has(f) }

	// Keys in bytewise order.
	w.str("account_period", r.AccountPeriod)
	if has(record.FieldAmount) {
		w.str("amount", r.Amount)
	}
	if has(record.FieldCorrects) {
		w.str("corrects", r.Corrects)
		if r.CorrectsPeriod != "" && r.CorrectsPeriod != r.AccountPeriod {
			w.str("corrects_period", r.CorrectsPeriod)
		}
	}
	if has(record.FieldCurrency) {
		w.str("currency", r.Currency)
	}
	if has(record.FieldExpiresAt) && !r.ExpiresAt.IsZero() {
		w.time("expires_at", r.ExpiresAt)
	}
	if has(record.FieldFinalizationVersion) && r.FinalizationVersion != 0 {
		w.key("finalization_version")
		w.b = strconv.AppendInt(w.b, r.FinalizationVersion, 10)
	}
	if has(record.FieldHoldID) && r.HoldID != "" {
		w.str("hold_id", r.HoldID)
		if r.HoldPeriod != "" && r.HoldPeriod != r.AccountPeriod {
			w.str("hold_period", r.HoldPeriod)
		}
	}
	w.str("kind", string(r.Kind))
	if has(record.FieldMeter) {
		w.str("meter", r.Meter)
	}
	if has(record.FieldOccurredAt) {
		w.time("occurred_at", r.OccurredAt)
	}
	if has(record.FieldQuantity) {
		w.str("quantity", r.Quantity)
	}
	w.str("record_id", r.RecordID)
	if has(record.FieldSubject) {
		w.str("subject", r.Subject)
	}
	w.str("tenant_id", r.TenantID)
	if has(record.FieldUnit) {
		w.str("unit", r.Unit)
	}
	return append(w.b, '}')
}

// materialFields is the set of fields Canonical writes for a kind: the
// fields the kind takes, less provenance; for operations on another record
// (refund, reclaim, hold_release, and the expire settle makes), only the
// identity.
func materialFields(k record.Kind) record.FieldSet {
	switch k {
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease, record.KindExpire:
		return 1<<record.FieldTenantID | 1<<record.FieldAccountPeriod | 1<<record.FieldRecordID | 1<<record.FieldKind
	}
	return k.Fields() &^ (1<<record.FieldSource | 1<<record.FieldAttributes)
}

type canonWriter struct {
	b     []byte
	comma bool
}

func (w *canonWriter) key(k string) {
	if w.comma {
		w.b = append(w.b, ',')
	}
	w.comma = true
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *canonWriter) str(k, v string) {
	w.key(k)
	w.b = append(w.b, '"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			w.b = append(w.b, '\\', c)
		case c < 0x20:
			// Unreachable for decoded records; kept so that a hand-built
			// Record still yields valid JSON.
			w.b = append(w.b, `\u00`...)
			w.b = append(w.b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			w.b = append(w.b, c)
		}
	}
	w.b = append(w.b, '"')
}

func (w *canonWriter) time(k string, t time.Time) {
	w.key(k)
	w.b = append(w.b, '"')
	w.b = appendRFC3339(w.b, t)
	w.b = append(w.b, '"')
}

// CanonicalAt returns the canonical form of r in the given version, so that
// an incoming record can be compared with a stored one in the stored
// record's version. Only version 1 exists.
func CanonicalAt(version int, r *record.Record) ([]byte, error) {
	switch version {
	case 1:
		return Canonical(r), nil
	}
	return nil, fmt.Errorf("fingerprint: unknown canonical version %d (this build knows 1 to %d)", version, CanonicalVersion)
}

// Sum is the fingerprint of a canonical form: its xxhash64. It is a fast
// filter only; equal sums are confirmed by comparing the canonical bytes.
func Sum(canonical []byte) uint64 { return xxhash.Sum64(canonical) }

// CanonicalFields returns the fields of a canonical form (of any version: it
// is a flat JSON object), strings decoded and numbers as their JSON text.
// It serves analysts' diffs, not validation.
func CanonicalFields(canonical []byte) (map[string]string, error) {
	m, err := record.FlatFields(canonical)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: canonical form: %w", err)
	}
	return m, nil
}

// FieldDiff is one field whose value differs between two canonical forms. A
// field present on one side only shows "" on the other.
type FieldDiff struct {
	Field    string
	Stored   string
	Incoming string
}

// Diff returns the fields that differ between a stored and an incoming
// canonical form, sorted by field name: the per-field diff of a
// fingerprint_mismatch case.
func Diff(stored, incoming []byte) ([]FieldDiff, error) {
	a, err := CanonicalFields(stored)
	if err != nil {
		return nil, fmt.Errorf("stored: %w", err)
	}
	b, err := CanonicalFields(incoming)
	if err != nil {
		return nil, fmt.Errorf("incoming: %w", err)
	}
	var diffs []FieldDiff
	for k, av := range a {
		if bv, ok := b[k]; !ok || av != bv {
			diffs = append(diffs, FieldDiff{Field: k, Stored: av, Incoming: bv})
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, FieldDiff{Field: k, Incoming: bv})
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Field < diffs[j].Field })
	return diffs, nil
}

// appendRFC3339 appends t in UTC as YYYY-MM-DDTHH:MM:SS[.F]Z, with the
// fraction only when it is not zero and without trailing zeros: the one
// canonical text of an instant.
func appendRFC3339(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendInt(b, year, 4)
	b = append(b, '-')
	b = appendInt(b, int(month), 2)
	b = append(b, '-')
	b = appendInt(b, day, 2)
	b = append(b, 'T')
	b = appendInt(b, hour, 2)
	b = append(b, ':')
	b = appendInt(b, minute, 2)
	b = append(b, ':')
	b = appendInt(b, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		b = append(b, '.')
		b = appendInt(b, ns, digits)
	}
	return append(b, 'Z')
}

// appendInt appends a non-negative v zero-padded to width digits.
func appendInt(b []byte, v, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || width > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	return append(b, buf[i:]...)
}
