package record

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

func validKind(s string) bool {
	for _, k := range Kinds {
		if string(k) == s {
			return true
		}
	}
	return false
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
	// The kind decides what else is required, so it is read first; its
	// error is reported in table order below.
	kind, kindErr := fs.kind()
	var required, optional uint32 = bitCommon, 0
	if kindErr == nil && kind != "" {
		r.Kind = kind
		required, optional = kindFields(r.Kind)
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
		if err := d.field(&r, fs, f); err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// kind reads the kind field: empty when it is absent, an error when it is not
// one of Kinds.
func (fs *fields) kind() (Kind, *DecodeError) {
	text, err := fs.str(fKind, "a string")
	if err != nil || text == "" {
		return "", err
	}
	if validKind(text) {
		return Kind(text), nil
	}
	if fs.name[fKind] == "type" || fs.name[fKind] == "ce_type" {
		return "", fieldError(fs.name[fKind], "%s is not a kind; it must be one of %s or end in \".<kind>\"", quote(text), kindList())
	}
	return "", fieldError(fs.name[fKind], "%s is not a kind; it must be one of %s", quote(text), kindList())
}

// field checks the present field f and sets it on r. Fields that depend on
// others (corrects_period, hold_period) rely on validate's slot order having
// set those first.
func (d *Decoder) field(r *Record, fs *fields, f int) *DecodeError {
	var err *DecodeError
	switch f {
	case fTenantID:
		r.TenantID, err = d.tenantID(fs, f)
	case fAccountPeriod:
		r.AccountPeriod, err = fs.period(f)
	case fRecordID:
		r.RecordID, err = fs.ident(f, identCharsMax)
	case fKind:
		// Read first, by validate.
	case fSubject:
		r.Subject, err = fs.ident(f, identCharsMax)
	case fOccurredAt:
		r.OccurredAt, err = fs.time(f)
	case fAmount:
		if r.Amount, err = fs.decimal(f, amountIntDigits, amountFracDigits); err != nil {
			return err
		}
		if (r.Kind == KindHold || r.Kind == KindGrant) && isZeroDecimal(r.Amount) {
			return fieldError(fs.name[f], "%s must be greater than 0 for kind %s", quote(fs.v[f].text), r.Kind)
		}
	case fCurrency:
		if r.Currency, err = fs.str(f, "a string"); err != nil {
			return err
		}
		if !validCurrency(r.Currency) {
			return fieldError(fs.name[f], "%s must be 1-%d characters of A-Z0-9_ (an ISO 4217 code or a credit unit such as CREDITS)", quote(r.Currency), currencyCharsMax)
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
			return nil // hold_period without hold_id is ignored
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
	return err
}

// tenantID checks the tenant against its form and, when the Decoder has a
// tenant list, against that list.
func (d *Decoder) tenantID(fs *fields, f int) (string, *DecodeError) {
	id, err := fs.ident(f, tenantIDCharsMax)
	if err != nil {
		return "", err
	}
	if !validTenantID(id) {
		return "", fieldError(fs.name[f], "%s must be 1-%d characters of A-Za-z0-9._:-", quote(id), tenantIDCharsMax)
	}
	if d.tenants != nil {
		if _, ok := d.tenants[id]; !ok {
			return "", fieldError(fs.name[f], "%s is not one of the configured tenants", quote(id))
		}
	}
	return id, nil
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
	b, bad := compactJSON(v.text)
	if bad != "" {
		return nil, fieldError(fs.name[f], "holds the number %s, which JSON stores cannot hold (at most 131072 digits before the point and 16383 after)", clip(bad))
	}
	return b, nil
}

// jsonbNumber tells whether PostgreSQL's jsonb (numeric) holds the JSON
// number n: its leading digit at most 10^131071 and at most 16383 digits
// after the point (a fraction's trailing zeros count).
func jsonbNumber(n string) bool {
	n = strings.TrimPrefix(n, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(n), "e")
	e, err := strconv.ParseInt(exp, 10, 64)
	if exp == "" {
		e, err = 0, nil
	}
	if err != nil || e > 1<<20 || e < -(1<<20) {
		return false // beyond any scale or weight numeric has, even for zero
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if int64(len(frac))-e > 16383 {
		return false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return true // zero
	}
	return int64(len(digits)-len(frac)-1)+e <= 131071
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

// ValidPeriod reports whether s is an account_period: YYYY-MM with a month
// from 01 to 12.
func ValidPeriod(s string) bool { return validPeriod(s) }

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

// compactJSON removes insignificant whitespace from valid JSON text, as
// json.Compact does, keeping escapes as they are; bad is its first number
// jsonb cannot hold, or "".
func compactJSON(s string) (b []byte, bad string) {
	b = make([]byte, 0, len(s))
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			b = append(b, c)
			switch c {
			case '\\':
				i++
				b = append(b, s[i])
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '"':
			inString = true
		case c == '-' || isDigit(c):
			j := i + 1
			for j < len(s) && (isDigit(s[j]) || strings.IndexByte(".eE+-", s[j]) >= 0) {
				j++
			}
			if bad == "" && !jsonbNumber(s[i:j]) {
				bad = s[i:j]
			}
			b = append(b, s[i:j]...)
			i = j - 1
			continue
		}
		b = append(b, c)
	}
	return b, bad
}
