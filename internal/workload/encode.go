package workload

import "strconv"

// spec is what a record is made of, enough to encode it again (with
// another provenance).
type spec struct {
	acct     int
	body     body
	recordID string
	kind     string
	cents    int64
	version  int    // finalization_version of a correction
	target   string // corrects (correction) or hold_id (capture)
}

// body is the shape of a record's fields after its identity.
type body uint8

const (
	bodyBare        body = iota // refund, hold_release: the identity only
	bodyFunding                 // a subject's first grant
	bodyGrant                   // a grant
	bodyHold                    // a hold
	bodyUsage                   // a usage (with target: a capture)
	bodyConflict                // a root usage with another amount
	bodyCorrection              // a correction to a new total
	bodyPoisonJSON              // a usage cut short: not JSON
	bodyPoisonField             // a usage whose amount is a JSON number
)

// encode writes s as JSON. Appending bytes, not marshalling maps: the
// benchmark generates a million records beside the service it measures.
// retried gives the record another provenance (source and attributes are
// not fingerprinted: the copy is still a duplicate).
func (w *Workload) encode(s *spec, retried bool) []byte {
	a := &w.accounts[s.acct]
	b := w.buf[:0]
	b = append(b, `{"tenant_id":"`...)
	b = append(b, a.tenant...)
	b = append(b, `","account_period":"`...)
	b = append(b, w.cfg.Period...)
	b = append(b, `","record_id":"`...)
	b = append(b, s.recordID...)
	b = append(b, `","kind":"`...)
	b = append(b, s.kind...)
	b = append(b, `","subject":"`...)
	b = append(b, a.subject...)
	b = append(b, `","occurred_at":"`...)
	b = append(b, w.occurred...)
	b = append(b, '"')
	ownProvenance := false
	switch s.body {
	case bodyFunding:
		b = append(b, `,"amount":"`...)
		if s.cents%100 == 0 {
			b = strconv.AppendInt(b, s.cents/100, 10)
		} else {
			b = Amount(s.cents).append(b)
		}
		b = append(b, `","currency":"USD"`...)
	case bodyGrant, bodyHold:
		b = appendAmount(b, s.cents)
	case bodyUsage, bodyPoisonJSON:
		b = appendAmount(b, s.cents)
		b = append(b, `,"meter":"gpu_seconds","quantity":"`...)
		b = strconv.AppendInt(b, s.cents, 10)
		b = append(b, `","unit":"s","finalization_version":1`...)
		if s.target != "" {
			b = append(append(append(b, `,"hold_id":"`...), s.target...), '"')
		}
		ownProvenance = w.cfg.Source != ""
	case bodyConflict:
		b = appendAmount(b, s.cents)
		b = append(b, `,"meter":"gpu_seconds","quantity":"1","unit":"s","finalization_version":1`...)
	case bodyCorrection:
		b = appendAmount(b, s.cents)
		b = append(b, `,"meter":"gpu_seconds","quantity":"1","unit":"s","finalization_version":`...)
		b = strconv.AppendInt(b, int64(s.version), 10)
		b = append(append(append(b, `,"corrects":"`...), s.target...), '"')
	case bodyPoisonField:
		// The contract wants a decimal string, never a JSON number.
		b = append(b, `,"amount":`...)
		b = Amount(s.cents).append(b)
		b = append(b, `,"currency":"USD","meter":"gpu_seconds","quantity":"1","unit":"s","finalization_version":1`...)
	}
	switch {
	case retried:
		b = append(b, `,"source":"retry-path","attributes":{"attempt":2}`...)
	case ownProvenance:
		b = append(append(append(b, `,"source":"`...), w.cfg.Source...), `","attributes":{"region":"eu-west-1"}`...)
	}
	if s.body != bodyPoisonJSON {
		b = append(b, '}')
	}
	w.buf = b
	return append([]byte(nil), b...)
}

// appendAmount appends `,"amount":"D.DD","currency":"USD"` for cents.
func appendAmount(b []byte, cents int64) []byte {
	b = append(b, `,"amount":"`...)
	b = Amount(cents).append(b)
	return append(b, `","currency":"USD"`...)
}
