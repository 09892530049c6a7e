package record

import (
	"fmt"
	"unicode/utf8"
)

// Reasons a record is refused, as they appear on the dead-letter topic
// (CONTRACT.md section 4). Callers branch on DecodeError.Reason.
const (
	// ReasonInvalidJSON: not JSON, not an object, trailing bytes, or a
	// duplicate key at any depth.
	ReasonInvalidJSON = "invalid_json"
	// ReasonTooLarge: the value is longer than Config.RecordBytesMax.
	ReasonTooLarge = "too_large"
	// ReasonInvalidField: valid JSON, but a field is missing or out of form.
	ReasonInvalidField = "invalid_field"
)

// RecordBytesMaxDefault is the record size limit when Config.RecordBytesMax
// is 0: 64 KiB, per CONTRACT.md section 2.
const RecordBytesMaxDefault = 64 << 10

// recordBytesMaxLimit bounds the configurable limit; a record is a message
// about usage, and a larger limit would only let one record hold up a batch.
const recordBytesMaxLimit = 16 << 20

// Limits of the contract's field table.
const (
	tenantIDCharsMax = 128
	identCharsMax    = 256 // record_id, subject, meter, unit, corrects, hold_id, source
	currencyCharsMax = 16
	amountIntDigits  = 18
	amountFracDigits = 9
)

// DecodeError says why a record was refused: the dead-letter reason, the
// field at fault ("record" for the record as a whole) and what is wrong with
// it, quoting the offending value.
type DecodeError struct {
	Reason string // ReasonInvalidJSON, ReasonTooLarge or ReasonInvalidField
	Field  string
	Msg    string
}

// Error reads like `amount: "1e400" has more than 18 integer digits`.
func (e *DecodeError) Error() string { return e.Field + ": " + e.Msg }

func fieldError(field, format string, args ...any) *DecodeError {
	return &DecodeError{Reason: ReasonInvalidField, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Config configures a Decoder. The zero value is ready to use.
type Config struct {
	// RecordBytesMax is the largest record value accepted, in bytes; 0 means
	// RecordBytesMaxDefault (64 KiB). Larger values are refused too_large
	// before they are parsed.
	RecordBytesMax int
	// Tenants, when not empty, is the list of tenants records may name; a
	// record of any other tenant is refused invalid_field. Empty accepts any
	// well-formed tenant_id.
	Tenants []string
}

// Validate reports a configuration the Decoder cannot honour.
func (c Config) Validate() error {
	if c.RecordBytesMax < 0 || c.RecordBytesMax > recordBytesMaxLimit {
		return fmt.Errorf("record: --record-bytes-max %d is out of range 0 (default %d) to %d", c.RecordBytesMax, RecordBytesMaxDefault, recordBytesMaxLimit)
	}
	for _, t := range c.Tenants {
		if !validTenantID(t) {
			return fmt.Errorf("record: --tenants entry %s must be 1-%d characters of A-Za-z0-9._:-", quote(t), tenantIDCharsMax)
		}
	}
	return nil
}

// Decoder turns record values into validated Records. It is safe for
// concurrent use: it holds only its configuration.
type Decoder struct {
	recordBytesMax int
	tenants        map[string]struct{} // nil: any tenant
}

// NewDecoder returns a Decoder for cfg, or cfg's validation error.
func NewDecoder(cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Decoder{recordBytesMax: cfg.RecordBytesMax}
	if d.recordBytesMax == 0 {
		d.recordBytesMax = RecordBytesMaxDefault
	}
	if len(cfg.Tenants) > 0 {
		d.tenants = make(map[string]struct{}, len(cfg.Tenants))
		for _, t := range cfg.Tenants {
			d.tenants[t] = struct{}{}
		}
	}
	return d, nil
}

// Decode validates one record value with its Kafka headers and returns the
// Record. value may be a plain JSON record, a CloudEvents 1.0 structured-mode
// event (a JSON object with "specversion") or, when the headers carry
// ce_specversion, the data of a binary-mode event. Decode does not retain
// value or headers: it copies value once and the Record's strings share that
// copy, which keeps a decode to a couple of allocations. Every error is a
// *DecodeError.
func (d *Decoder) Decode(value []byte, headers []Header) (Record, error) {
	r, err := d.decode(value, headers)
	if err != nil {
		return Record{}, err
	}
	return r, nil
}

func (d *Decoder) decode(raw []byte, headers []Header) (Record, *DecodeError) {
	if len(raw) > d.recordBytesMax {
		return Record{}, &DecodeError{Reason: ReasonTooLarge, Field: "record", Msg: fmt.Sprintf("%d bytes is more than the %d-byte limit", len(raw), d.recordBytesMax)}
	}
	var fs fields
	fs.name = fieldNames
	binary, err := binaryCloudEvent(headers)
	if err != nil {
		return Record{}, err
	}
	var top slots
	if err := scanTop(string(raw), &top); err != nil {
		return Record{}, err
	}
	switch {
	case binary != nil:
		// The value is the event's data; the attributes are headers.
		copy(fs.v[:], top[:nRecordFields])
		if err := mergeCloudEvent(&fs, binary, "ce_"); err != nil {
			return Record{}, err
		}
	case top[cSpecVersion].kind != kindAbsent:
		if err := structuredCloudEvent(&fs, &top); err != nil {
			return Record{}, err
		}
	default:
		copy(fs.v[:], top[:nRecordFields])
	}
	return d.validate(&fs)
}

// scanTop scans a whole record value, which must be one JSON object and
// nothing else, into its slots.
func scanTop(s string, top *slots) *DecodeError {
	sc := scanner{s: s}
	sc.skipSpace()
	if sc.pos < len(s) && s[sc.pos] != '{' {
		v, err := sc.value("", 0)
		if err != nil {
			return err
		}
		return &DecodeError{Reason: ReasonInvalidJSON, Field: "record", Msg: fmt.Sprintf("must be a JSON object, not %s", v.kind.describe())}
	}
	err := sc.object("", func(key string) *DecodeError {
		slot := slotOf(key)
		where := key
		v, err := sc.value(where, 1)
		if err == nil && slot >= 0 {
			top[slot] = v
		}
		return err
	})
	if err != nil {
		return err
	}
	sc.skipSpace()
	if sc.pos != len(s) {
		return sc.syntaxError("unexpected data after the JSON object")
	}
	return nil
}

// quote quotes s for an error message, truncated so that a hostile value
// cannot flood the logs.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}

// clip is quote without the quotes, for JSON numbers: their text is already
// unambiguous, but it may be arbitrarily long.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}
