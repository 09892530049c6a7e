package fingerprint

import (
	"errors"

	"github.com/settlehq/settle/record"
)

// Decoded is one input record's bytes taken as far as settling needs: the
// validated Record with its Identity, its canonical form and fingerprint,
// or, when the bytes are not a valid record, why (Err; the rest is zero).
type Decoded struct {
	Record    record.Record
	Identity  record.Identity
	Canonical []byte // Canonical(&Record), version CanonicalVersion
	Sum       uint64 // Sum(Canonical)
	Err       *record.DecodeError
}

// Prepare decodes value and headers with d (record.Decoder.Decode) and
// completes the record's identity, canonical form and fingerprint. An
// error of any kind comes back as Err, never panics: a caller settles or
// dead-letters every record it is given.
func Prepare(d *record.Decoder, value []byte, headers []record.Header) Decoded {
	rec, err := d.Decode(value, headers)
	if err != nil {
		var de *record.DecodeError
		if !errors.As(err, &de) {
			de = &record.DecodeError{Reason: record.ReasonInvalidJSON, Field: "record", Msg: err.Error()}
		}
		return Decoded{Err: de}
	}
	c := Canonical(&rec)
	return Decoded{Record: rec, Identity: rec.Identity(), Canonical: c, Sum: Sum(c)}
}
