package record

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
		return fmt.Errorf("fingerprint: RecordBytesMax %d is out of range 0 (default %d) to %d", c.RecordBytesMax, RecordBytesMaxDefault, recordBytesMaxLimit)
	}
	for _, t := range c.Tenants {
		if !validTenantID(t) {
			return fmt.Errorf("fingerprint: tenant %s must be 1-%d characters of A-Za-z0-9._:-", quote(t), tenantIDCharsMax)
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

// Field slots. The record fields come first, in the order they are
// validated (the contract table's order), so that a record with several
// faults always reports the same one.
const (
	fTenantID = iota
	fAccountPeriod
	fRecordID
	fKind
	fSubject
	fOccurredAt
	fAmount
	fCurrency
	fMeter
	fQuantity
	fUnit
	fFinalizationVersion
	fCorrects
	fCorrectsPeriod
	fHoldID
	fHoldPeriod
	fExpiresAt
	fSource
	fAttributes
	nRecordFields
)

// CloudEvents attributes that are not also record field names (subject and
// source are) have slots after the record fields.
const (
	cSpecVersion = nRecordFields + iota
	cID
	cType
	cTime
	cTenantID
	cData
	cDataBase64
	cDataContentType
	nSlots
)

var fieldNames = [nRecordFields]string{
	"tenant_id", "account_period", "record_id", "kind", "subject", "occurred_at",
	"amount", "currency", "meter", "quantity", "unit", "finalization_version",
	"corrects", "corrects_period", "hold_id", "hold_period", "expires_at", "source", "attributes",
}

// slotOf maps a top-level key to its slot, or -1 for keys that are ignored.
func slotOf(key string) int {
	switch key {
	case "tenant_id":
		return fTenantID
	case "account_period":
		return fAccountPeriod
	case "record_id":
		return fRecordID
	case "kind":
		return fKind
	case "subject":
		return fSubject
	case "occurred_at":
		return fOccurredAt
	case "amount":
		return fAmount
	case "currency":
		return fCurrency
	case "meter":
		return fMeter
	case "quantity":
		return fQuantity
	case "unit":
		return fUnit
	case "finalization_version":
		return fFinalizationVersion
	case "corrects":
		return fCorrects
	case "corrects_period":
		return fCorrectsPeriod
	case "hold_id":
		return fHoldID
	case "hold_period":
		return fHoldPeriod
	case "expires_at":
		return fExpiresAt
	case "source":
		return fSource
	case "attributes":
		return fAttributes
	case "specversion":
		return cSpecVersion
	case "id":
		return cID
	case "type":
		return cType
	case "time":
		return cTime
	case "tenantid":
		return cTenantID
	case "data":
		return cData
	case "data_base64":
		return cDataBase64
	case "datacontenttype":
		return cDataContentType
	}
	return -1
}

// ceMapping is how CloudEvents attributes become record fields.
var ceMapping = [...]struct {
	ce, field int
	name      string // the attribute's name, without the ce_ header prefix
}{
	{cTenantID, fTenantID, "tenantid"},
	{cID, fRecordID, "id"},
	{cType, fKind, "type"},
	{fSubject, fSubject, "subject"},
	{cTime, fOccurredAt, "time"},
	{fSource, fSource, "source"},
}

// slots holds the scanned values of one JSON object, by slot.
type slots [nSlots]value

// fields is what validation reads: one value per record field and the name
// to blame it on (a CloudEvents attribute's name when it came from one).
type fields struct {
	v    [nRecordFields]value
	name [nRecordFields]string
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

// binaryCloudEvent returns the CloudEvents attributes carried in ce_
// headers, or nil when there is no ce_specversion header (not binary mode).
func binaryCloudEvent(headers []Header) (*slots, *DecodeError) {
	isCE := false
	for _, h := range headers {
		if h.Key == "ce_specversion" {
			isCE = true
			break
		}
	}
	if !isCE {
		return nil, nil
	}
	var ce slots
	for _, h := range headers {
		var slot int
		switch {
		case h.Key == "content-type":
			slot = cDataContentType
		case strings.HasPrefix(h.Key, "ce_"):
			switch h.Key[3:] {
			case "specversion", "id", "type", "subject", "time", "source", "tenantid":
				slot = slotOf(h.Key[3:])
			default:
				continue // other attributes and extensions are ignored
			}
		default:
			continue
		}
		if ce[slot].kind != kindAbsent {
			return nil, fieldError(h.Key, "header appears more than once; a CloudEvents attribute has one value")
		}
		var flags uint8
		if !utf8.Valid(h.Value) {
			flags = flagBadUTF8
		}
		ce[slot] = value{kind: kindString, flags: flags, text: string(h.Value)}
	}
	if err := checkCloudEvent(&ce, "ce_", "content-type"); err != nil {
		return nil, err
	}
	return &ce, nil
}

// checkCloudEvent checks the attributes that say how to read the event.
func checkCloudEvent(ce *slots, prefix, contentTypeName string) *DecodeError {
	if v := ce[cSpecVersion]; v.kind != kindString || v.text != "1.0" {
		return fieldError(prefix+"specversion", "%s must be \"1.0\"; only CloudEvents 1.0 is supported", describeValue(v))
	}
	if v := ce[cDataContentType]; v.kind != kindAbsent && v.kind != kindNull {
		mt := v.text
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		mt = strings.ToLower(strings.TrimSpace(mt))
		if v.kind != kindString || (mt != "application/json" && mt != "text/json" && !strings.HasSuffix(mt, "+json")) {
			return fieldError(contentTypeName, "%s is not JSON; the event's data must be a JSON object (application/json)", describeValue(v))
		}
	}
	return nil
}

// structuredCloudEvent reads a structured-mode event: attributes at the top,
// record fields in data.
func structuredCloudEvent(fs *fields, top *slots) *DecodeError {
	if err := checkCloudEvent(top, "", "datacontenttype"); err != nil {
		return err
	}
	if top[cDataBase64].kind != kindAbsent {
		return fieldError("data_base64", "binary data is not supported; send the record's fields as a JSON object in data")
	}
	data := top[cData]
	if data.kind == kindAbsent {
		return fieldError("data", "required: a CloudEvent carries the record's fields in data")
	}
	if data.kind != kindObject {
		return fieldError("data", "must be a JSON object, not %s", data.kind.describe())
	}
	var inner slots
	if err := scanTop(data.text, &inner); err != nil {
		return err // cannot happen: data was validated with the event
	}
	copy(fs.v[:], inner[:nRecordFields])
	return mergeCloudEvent(fs, top, "")
}

// mergeCloudEvent puts the CloudEvents attributes in place of the record
// fields they map to. A data field that repeats an attribute must agree with
// it: silently preferring one would hide a producer's bug.
func mergeCloudEvent(fs *fields, ce *slots, prefix string) *DecodeError {
	for _, m := range ceMapping {
		av := ce[m.ce]
		if av.kind == kindAbsent || av.kind == kindNull {
			if !fs.present(m.field) {
				fs.name[m.field] = prefix + m.name // blame the attribute producers are meant to set
			}
			continue
		}
		if m.field == fKind && av.kind == kindString {
			av.text = kindFromType(av.text)
		}
		dv := fs.v[m.field]
		if dv.kind != kindAbsent && dv.kind != kindNull && (dv.kind != av.kind || dv.text != av.text) {
			return fieldError(prefix+m.name, "%s disagrees with data field %s %s", describeValue(ce[m.ce]), fieldNames[m.field], describeValue(dv))
		}
		fs.v[m.field] = av
		fs.name[m.field] = prefix + m.name
	}
	return nil
}

// kindFromType maps a CloudEvents type to a kind: the kind itself or a name
// ending in ".<kind>". Anything else is returned unchanged, to be refused by
// kind validation with the producer's own text.
func kindFromType(t string) string {
	if validKind(t) {
		return t
	}
	if i := strings.LastIndexByte(t, '.'); i >= 0 && validKind(t[i+1:]) {
		return t[i+1:]
	}
	return t
}

func validKind(s string) bool {
	for _, k := range Kinds {
		if string(k) == s {
			return true
		}
	}
	return false
}

// describeValue renders a value for an error message.
func describeValue(v value) string {
	switch v.kind {
	case kindString:
		return quote(v.text)
	case kindAbsent:
		return "absent"
	}
	return quote(v.text) + " (" + v.kind.describe() + ")"
}

// Field applicability: which fields a kind requires and which it accepts
// without requiring. Fields outside both are ignored.
const (
	bitAmountCurrency = 1<<fAmount | 1<<fCurrency
	bitMeterQtyUnit   = 1<<fMeter | 1<<fQuantity | 1<<fUnit
	bitCommon         = 1<<fTenantID | 1<<fAccountPeriod | 1<<fRecordID | 1<<fKind | 1<<fSubject | 1<<fOccurredAt
	bitProvenance     = 1<<fSource | 1<<fAttributes
)

func kindFields(k Kind) (required, optional uint32) {
	required, optional = bitCommon, bitProvenance
	switch k {
	case KindUsage:
		required |= bitAmountCurrency | bitMeterQtyUnit | 1<<fFinalizationVersion
		optional |= 1<<fHoldID | 1<<fHoldPeriod
	case KindCorrection:
		required |= bitAmountCurrency | bitMeterQtyUnit | 1<<fFinalizationVersion | 1<<fCorrects
		optional |= 1 << fCorrectsPeriod
	case KindReversal:
		required |= 1 << fCorrects
		optional |= 1<<fFinalizationVersion | 1<<fCorrectsPeriod
	case KindHold:
		required |= bitAmountCurrency
		optional |= 1 << fExpiresAt
	case KindGrant:
		required |= bitAmountCurrency
	}
	return required, optional
}

// validate checks every field against the contract's table and builds the
// Record. Fields are checked in slot order so that the first fault reported
// is always the same one.
func (d *Decoder) validate(fs *fields) (Record, *DecodeError) {
	var r Record
	var err *DecodeError

	// The kind decides what else is required, so it is read first; its
	// error is reported in table order below.
	kindText, kindErr := fs.str(fKind, "a string")
	var required, optional uint32 = bitCommon, 0
	if kindErr == nil && kindText != "" {
		if !validKind(kindText) {
			if fs.name[fKind] == "type" || fs.name[fKind] == "ce_type" {
				kindErr = fieldError(fs.name[fKind], "%s is not a kind; it must be one of %s or end in \".<kind>\"", quote(kindText), kindList())
			} else {
				kindErr = fieldError(fs.name[fKind], "%s is not a kind; it must be one of %s", quote(kindText), kindList())
			}
		} else {
			r.Kind = Kind(kindText)
			required, optional = kindFields(r.Kind)
		}
	}

	for f := 0; f < nRecordFields; f++ {
		bit := uint32(1) << f
		if required&bit == 0 && optional&bit == 0 {
			continue
		}
		if f == fKind {
			if kindErr != nil {
				return Record{}, kindErr
			}
		}
		if !fs.present(f) {
			if required&bit == 0 {
				continue
			}
			if bitCommon&bit != 0 {
				return Record{}, fieldError(fs.name[f], "required")
			}
			return Record{}, fieldError(fs.name[f], "required for kind %s", r.Kind)
		}
		switch f {
		case fTenantID:
			if r.TenantID, err = fs.ident(f, tenantIDCharsMax); err != nil {
				return Record{}, err
			}
			if !validTenantID(r.TenantID) {
				return Record{}, fieldError(fs.name[f], "%s must be 1-%d characters of A-Za-z0-9._:-", quote(r.TenantID), tenantIDCharsMax)
			}
			if d.tenants != nil {
				if _, ok := d.tenants[r.TenantID]; !ok {
					return Record{}, fieldError(fs.name[f], "%s is not one of the configured tenants", quote(r.TenantID))
				}
			}
		case fAccountPeriod:
			r.AccountPeriod, err = fs.period(f)
		case fRecordID:
			r.RecordID, err = fs.ident(f, identCharsMax)
		case fKind:
			// Read above.
		case fSubject:
			r.Subject, err = fs.ident(f, identCharsMax)
		case fOccurredAt:
			r.OccurredAt, err = fs.time(f)
		case fAmount:
			if r.Amount, err = fs.decimal(f, amountIntDigits, amountFracDigits); err != nil {
				return Record{}, err
			}
			if (r.Kind == KindHold || r.Kind == KindGrant) && isZeroDecimal(r.Amount) {
				return Record{}, fieldError(fs.name[f], "%s must be greater than 0 for kind %s", quote(fs.v[f].text), r.Kind)
			}
		case fCurrency:
			if r.Currency, err = fs.str(f, "a string"); err != nil {
				return Record{}, err
			}
			if !validCurrency(r.Currency) {
				return Record{}, fieldError(fs.name[f], "%s must be 1-%d characters of A-Z0-9_ (an ISO 4217 code or a credit unit such as CREDITS)", quote(r.Currency), currencyCharsMax)
			}
		case fMeter:
			r.Meter, err = fs.ident(f, identCharsMax)
		case fQuantity:
			r.Quantity, err = fs.decimal(f, 0, 0)
		case fUnit:
			r.Unit, err = fs.ident(f, identCharsMax)
		case fFinalizationVersion:
			r.FinalizationVersion, err = fs.version(f)
		case fCorrects:
			r.Corrects, err = fs.ident(f, identCharsMax)
		case fCorrectsPeriod:
			if r.CorrectsPeriod, err = fs.period(f); r.CorrectsPeriod == r.AccountPeriod {
				r.CorrectsPeriod = "" // equal counts as absent
			}
		case fHoldID:
			r.HoldID, err = fs.ident(f, identCharsMax)
		case fHoldPeriod:
			if r.HoldID == "" {
				continue // hold_period without hold_id is ignored
			}
			if r.HoldPeriod, err = fs.period(f); r.HoldPeriod == r.AccountPeriod {
				r.HoldPeriod = ""
			}
		case fExpiresAt:
			r.ExpiresAt, err = fs.time(f)
		case fSource:
			r.Source, err = fs.text(f, identCharsMax)
		case fAttributes:
			r.Attributes, err = fs.attributes(f)
		}
		if err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// present reports whether field f has a value; null counts as absent, as
// producers commonly serialise missing optional fields as null.
func (fs *fields) present(f int) bool {
	k := fs.v[f].kind
	return k != kindAbsent && k != kindNull
}

// str returns field f's string, or a typed error naming what was expected.
func (fs *fields) str(f int, want string) (string, *DecodeError) {
	v := fs.v[f]
	switch v.kind {
	case kindAbsent, kindNull:
		return "", nil
	case kindString:
		return v.text, nil
	}
	return "", fieldError(fs.name[f], "must be %s, not %s", want, v.kind.describe())
}

// text returns a string that may be empty but must be printable, valid
// UTF-8 and at most charsMax characters.
func (fs *fields) text(f int, charsMax int) (string, *DecodeError) {
	s, err := fs.str(f, "a string")
	if err != nil {
		return "", err
	}
	if fs.v[f].flags&flagBadUTF8 != 0 || !utf8.ValidString(s) {
		return "", fieldError(fs.name[f], "%s is not valid UTF-8", quote(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return "", fieldError(fs.name[f], "%s contains the control character U+%04X; identifiers must be printable", quote(s), c)
		}
	}
	if n := utf8.RuneCountInString(s); n > charsMax {
		return "", fieldError(fs.name[f], "%s is %d characters, more than %d", quote(s), n, charsMax)
	}
	return s, nil
}

// ident is text of at least one character.
func (fs *fields) ident(f int, charsMax int) (string, *DecodeError) {
	s, err := fs.text(f, charsMax)
	if err == nil && s == "" {
		err = fieldError(fs.name[f], "must not be empty (1-%d characters)", charsMax)
	}
	return s, err
}

func (fs *fields) period(f int) (string, *DecodeError) {
	s, err := fs.str(f, "a YYYY-MM string")
	if err != nil {
		return "", err
	}
	if !validPeriod(s) {
		return "", fieldError(fs.name[f], "%s must be YYYY-MM with a month from 01 to 12", quote(s))
	}
	return s, nil
}

func (fs *fields) decimal(f int, intDigitsMax, fracDigitsMax int) (string, *DecodeError) {
	v := fs.v[f]
	if v.kind == kindNumber {
		if len(v.text) > 32 {
			return "", fieldError(fs.name[f], "must be a decimal string, not a JSON number")
		}
		return "", fieldError(fs.name[f], "must be a decimal string, not a JSON number (write \"%s\", not %s)", v.text, v.text)
	}
	s, err := fs.str(f, "a decimal string")
	if err != nil {
		return "", err
	}
	n, nerr := NormalizeDecimal(s, intDigitsMax, fracDigitsMax)
	if nerr != nil {
		return "", fieldError(fs.name[f], "%s", nerr.Error())
	}
	return n, nil
}

func (fs *fields) time(f int) (t time.Time, err *DecodeError) {
	s, err := fs.str(f, "an RFC 3339 string")
	if err != nil {
		return t, err
	}
	t, msg := parseRFC3339(s)
	if msg != "" {
		return t, fieldError(fs.name[f], "%s is not an RFC 3339 time: %s", quote(s), msg)
	}
	return t, nil
}

// version reads a JSON integer ≥ 1. Strings and numbers with a fraction or
// exponent are refused even when integral ("2", 1.0, 1e0): versions are
// compared as integers, and a producer that sends them otherwise is
// mis-serialising something.
func (fs *fields) version(f int) (int64, *DecodeError) {
	v := fs.v[f]
	if v.kind != kindNumber {
		return 0, fieldError(fs.name[f], "must be a JSON integer, not %s", v.kind.describe())
	}
	if strings.ContainsAny(v.text, ".eE") {
		return 0, fieldError(fs.name[f], "%s must be a JSON integer, without fraction or exponent", clip(v.text))
	}
	n, perr := strconv.ParseInt(v.text, 10, 64)
	if perr != nil {
		if errors.Is(perr, strconv.ErrRange) && v.text[0] != '-' {
			return 0, fieldError(fs.name[f], "%s is more than %d", clip(v.text), int64(1<<63-1))
		}
		return 0, fieldError(fs.name[f], "%s must be at least 1", clip(v.text))
	}
	if n < 1 {
		return 0, fieldError(fs.name[f], "%s must be at least 1", clip(v.text))
	}
	return n, nil
}

func (fs *fields) attributes(f int) ([]byte, *DecodeError) {
	v := fs.v[f]
	if v.kind != kindObject {
		return nil, fieldError(fs.name[f], "must be a JSON object, not %s", v.kind.describe())
	}
	// Attributes are carried to storage and to outputs; refuse what a
	// JSON store such as PostgreSQL's jsonb cannot hold, here, where the
	// producer learns of it, rather than fail later.
	if v.flags&flagBadUTF8 != 0 {
		return nil, fieldError(fs.name[f], "contains invalid UTF-8 or a lone surrogate escape")
	}
	if v.flags&flagNUL != 0 {
		return nil, fieldError(fs.name[f], `contains "\u0000", which JSON stores cannot hold`)
	}
	return compactJSON(v.text), nil
}

func validTenantID(s string) bool {
	if len(s) == 0 || len(s) > tenantIDCharsMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

func validCurrency(s string) bool {
	if len(s) == 0 || len(s) > currencyCharsMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validPeriod checks YYYY-MM with a month from 01 to 12.
func validPeriod(s string) bool {
	if len(s) != 7 || s[4] != '-' {
		return false
	}
	for _, i := range [...]int{0, 1, 2, 3, 5, 6} {
		if !isDigit(s[i]) {
			return false
		}
	}
	m := (s[5]-'0')*10 + s[6] - '0'
	return m >= 1 && m <= 12
}

func kindList() string {
	var b strings.Builder
	for i, k := range Kinds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(k))
	}
	return b.String()
}
