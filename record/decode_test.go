package record

import (
	"errors"
	"strings"
	"testing"
)

// usageJSON is a valid usage record; malformed cases are edits of it, so
// that each case fails for one reason only.
const usageJSON = `{"tenant_id":"acme","account_period":"2026-11","record_id":"u-1","kind":"usage","subject":"acct-42","amount":"40","currency":"USD","meter":"gpu_seconds","quantity":"3600","unit":"s","occurred_at":"2026-11-05T11:04:05Z","finalization_version":1}`

// with replaces one field of usageJSON (old is the exact `"key":value` text).
func with(old, new string) string {
	if !strings.Contains(usageJSON, old) {
		panic("usageJSON has no " + old)
	}
	return strings.Replace(usageJSON, old, new, 1)
}

const reversalJSON = `{"tenant_id":"acme","account_period":"2026-11","record_id":"r-1","kind":"reversal","subject":"acct-42","occurred_at":"2026-11-06T00:00:00Z","corrects":"u-1"}`
const holdJSON = `{"tenant_id":"acme","account_period":"2026-11","record_id":"h-1","kind":"hold","subject":"acct-42","amount":"10","currency":"USD","occurred_at":"2026-11-06T00:00:00Z"}`

type malformedCase struct {
	name    string
	value   string
	headers []Header
	reason  string
	field   string
	msg     string // substring of Error()
}

func ceHeaders(kv ...string) []Header {
	var hs []Header
	for i := 0; i < len(kv); i += 2 {
		hs = append(hs, Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

var malformedCases = []malformedCase{
	// Not JSON, not an object.
	{"not json", `hello`, nil, ReasonInvalidJSON, "record", "unexpected"},
	{"empty", ``, nil, ReasonInvalidJSON, "record", "end of input"},
	{"truncated", usageJSON[:40], nil, ReasonInvalidJSON, "record", "unterminated"},
	{"truncated after comma", `{"tenant_id":"acme",`, nil, ReasonInvalidJSON, "record", "expected a string key"},
	{"array", `[` + usageJSON + `]`, nil, ReasonInvalidJSON, "record", "must be a JSON object, not a JSON array"},
	{"string", `"usage"`, nil, ReasonInvalidJSON, "record", "must be a JSON object, not a JSON string"},
	{"trailing garbage", usageJSON + `x`, nil, ReasonInvalidJSON, "record", "unexpected data after the JSON object"},
	{"two objects", usageJSON + usageJSON, nil, ReasonInvalidJSON, "record", "unexpected data after"},
	{"trailing comma", with(`"finalization_version":1`, `"finalization_version":1,`), nil, ReasonInvalidJSON, "record", "expected a string key"},
	{"raw control in string", with(`"u-1"`, "\"u-\n1\""), nil, ReasonInvalidJSON, "record", "control character"},
	{"bad escape", with(`"u-1"`, `"u-\x1"`), nil, ReasonInvalidJSON, "record", "invalid escape"},
	{"bad number", with(`"finalization_version":1`, `"finalization_version":01`), nil, ReasonInvalidJSON, "record", "expected ',' or '}'"},
	{"single quotes", `{'tenant_id':'acme'}`, nil, ReasonInvalidJSON, "record", "expected a string key"},
	{"deep nesting", with(`"finalization_version":1`, `"finalization_version":1,"x":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)), nil, ReasonInvalidJSON, "record", "nested more than 128"},
	{"too large", `{"x":"` + strings.Repeat("a", 70000) + `"}`, nil, ReasonTooLarge, "record", "70008 bytes is more than the 65536-byte limit"},

	// Duplicate keys, at any depth, even when the values agree.
	{"duplicate top-level key", with(`"amount":"40"`, `"amount":"40","amount":"40"`), nil, ReasonInvalidJSON, "record", `duplicate key "amount"`},
	{"duplicate escaped key", with(`"amount":"40"`, `"amount":"40","\u0061mount":"41"`), nil, ReasonInvalidJSON, "record", `duplicate key "amount"`},
	{"duplicate key in attributes", with(`"unit":"s"`, `"unit":"s","attributes":{"a":1,"b":{"c":1,"c":2}}`), nil, ReasonInvalidJSON, "record", `duplicate key "c" inside "attributes"`},
	{"duplicate key in unknown field", with(`"unit":"s"`, `"unit":"s","extra":[{"k":1,"k":1}]`), nil, ReasonInvalidJSON, "record", `duplicate key "k" inside "extra"`},
	{"duplicate key in ce data", `{"specversion":"1.0","id":"u-1","type":"usage","data":{"amount":"1","amount":"2"}}`, nil, ReasonInvalidJSON, "record", `duplicate key "amount" inside "data"`},

	// Missing required fields.
	{"missing tenant_id", strings.Replace(usageJSON, `"tenant_id":"acme",`, "", 1), nil, ReasonInvalidField, "tenant_id", "tenant_id: required"},
	{"missing account_period", with(`"account_period":"2026-11",`, ""), nil, ReasonInvalidField, "account_period", "required"},
	{"missing record_id", with(`"record_id":"u-1",`, ""), nil, ReasonInvalidField, "record_id", "required"},
	{"missing kind", with(`"kind":"usage",`, ""), nil, ReasonInvalidField, "kind", "kind: required"},
	{"missing subject", with(`"subject":"acct-42",`, ""), nil, ReasonInvalidField, "subject", "required"},
	{"missing occurred_at", with(`,"occurred_at":"2026-11-05T11:04:05Z"`, ""), nil, ReasonInvalidField, "occurred_at", "required"},
	{"missing amount", with(`"amount":"40",`, ""), nil, ReasonInvalidField, "amount", "amount: required for kind usage"},
	{"missing currency", with(`"currency":"USD",`, ""), nil, ReasonInvalidField, "currency", "required for kind usage"},
	{"missing meter", with(`"meter":"gpu_seconds",`, ""), nil, ReasonInvalidField, "meter", "required for kind usage"},
	{"missing quantity", with(`"quantity":"3600",`, ""), nil, ReasonInvalidField, "quantity", "required for kind usage"},
	{"missing unit", with(`"unit":"s",`, ""), nil, ReasonInvalidField, "unit", "required for kind usage"},
	{"missing finalization_version", with(`,"finalization_version":1`, ""), nil, ReasonInvalidField, "finalization_version", "finalization_version: required for kind usage"},
	{"null required field", with(`"amount":"40"`, `"amount":null`), nil, ReasonInvalidField, "amount", "required for kind usage"},
	{"correction without corrects", with(`"kind":"usage"`, `"kind":"correction"`), nil, ReasonInvalidField, "corrects", "corrects: required for kind correction"},
	{"reversal without corrects", strings.Replace(reversalJSON, `,"corrects":"u-1"`, "", 1), nil, ReasonInvalidField, "corrects", "required for kind reversal"},
	{"hold without amount", strings.Replace(holdJSON, `"amount":"10",`, "", 1), nil, ReasonInvalidField, "amount", "required for kind hold"},

	// Amounts and quantities.
	{"amount JSON number", with(`"amount":"40"`, `"amount":40`), nil, ReasonInvalidField, "amount", `amount: must be a decimal string, not a JSON number (write "40", not 40)`},
	{"amount JSON float", with(`"amount":"40"`, `"amount":40.5`), nil, ReasonInvalidField, "amount", "not a JSON number"},
	{"amount 19 integer digits", with(`"amount":"40"`, `"amount":"1234567890123456789"`), nil, ReasonInvalidField, "amount", "has more than 18 integer digits"},
	{"amount 1e18", with(`"amount":"40"`, `"amount":"1e18"`), nil, ReasonInvalidField, "amount", `"1e18" has more than 18 integer digits`},
	{"amount 1e400", with(`"amount":"40"`, `"amount":"1e400"`), nil, ReasonInvalidField, "amount", `amount: "1e400" has more than 18 integer digits`},
	{"amount 10 fraction digits", with(`"amount":"40"`, `"amount":"0.0000000001"`), nil, ReasonInvalidField, "amount", "has more than 9 fraction digits"},
	{"amount negative", with(`"amount":"40"`, `"amount":"-5"`), nil, ReasonInvalidField, "amount", `"-5" is negative`},
	{"amount plus sign", with(`"amount":"40"`, `"amount":"+5"`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount empty", with(`"amount":"40"`, `"amount":""`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount leading dot", with(`"amount":"40"`, `"amount":".5"`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount trailing dot", with(`"amount":"40"`, `"amount":"5."`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount hex", with(`"amount":"40"`, `"amount":"0x10"`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount with space", with(`"amount":"40"`, `"amount":" 40"`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"amount NaN", with(`"amount":"40"`, `"amount":"NaN"`), nil, ReasonInvalidField, "amount", "is not a decimal"},
	{"zero amount on hold", strings.Replace(holdJSON, `"amount":"10"`, `"amount":"0.00"`, 1), nil, ReasonInvalidField, "amount", `"0.00" must be greater than 0 for kind hold`},
	{"zero amount on grant", strings.Replace(strings.Replace(holdJSON, `"amount":"10"`, `"amount":"0e3"`, 1), `"hold"`, `"grant"`, 1), nil, ReasonInvalidField, "amount", "must be greater than 0 for kind grant"},
	{"quantity number", with(`"quantity":"3600"`, `"quantity":3600`), nil, ReasonInvalidField, "quantity", "must be a decimal string, not a JSON number"},
	{"quantity huge exponent", with(`"quantity":"3600"`, `"quantity":"1e999999999"`), nil, ReasonInvalidField, "quantity", "has more than 1000 integer digits"},

	// Identifiers and their forms.
	{"period month 13", with(`"2026-11"`, `"2026-13"`), nil, ReasonInvalidField, "account_period", `"2026-13" must be YYYY-MM with a month from 01 to 12`},
	{"period one-digit month", with(`"2026-11"`, `"2026-1"`), nil, ReasonInvalidField, "account_period", "must be YYYY-MM"},
	{"period month 00", with(`"2026-11"`, `"2026-00"`), nil, ReasonInvalidField, "account_period", "must be YYYY-MM"},
	{"period number", with(`"2026-11"`, `202611`), nil, ReasonInvalidField, "account_period", "must be a YYYY-MM string, not a JSON number"},
	{"bad corrects_period", strings.Replace(reversalJSON, `"corrects":"u-1"`, `"corrects":"u-1","corrects_period":"2026/10"`, 1), nil, ReasonInvalidField, "corrects_period", "must be YYYY-MM"},
	{"bad hold_period", with(`"unit":"s"`, `"unit":"s","hold_id":"h-1","hold_period":"26-10"`), nil, ReasonInvalidField, "hold_period", "must be YYYY-MM"},
	{"control character in record_id", with(`"u-1"`, `"u-\u0001"`), nil, ReasonInvalidField, "record_id", "control character U+0001"},
	{"DEL in subject", with(`"acct-42"`, "\"acct\x7f\""), nil, ReasonInvalidField, "subject", "control character U+007F"},
	{"newline escape in meter", with(`"gpu_seconds"`, `"gpu\nseconds"`), nil, ReasonInvalidField, "meter", "control character U+000A"},
	{"invalid UTF-8 in subject", with(`"acct-42"`, "\"acct\xff\""), nil, ReasonInvalidField, "subject", "not valid UTF-8"},
	{"lone surrogate in record_id", with(`"u-1"`, `"u-\ud800"`), nil, ReasonInvalidField, "record_id", "not valid UTF-8"},
	{"empty record_id", with(`"u-1"`, `""`), nil, ReasonInvalidField, "record_id", "must not be empty"},
	{"record_id too long", with(`"u-1"`, `"`+strings.Repeat("é", 257)+`"`), nil, ReasonInvalidField, "record_id", "is 257 characters, more than 256"},
	{"record_id number", with(`"u-1"`, `1`), nil, ReasonInvalidField, "record_id", "must be a string, not a JSON number"},
	{"bad tenant chars", with(`"acme"`, `"acme/eu"`), nil, ReasonInvalidField, "tenant_id", `"acme/eu" must be 1-128 characters of A-Za-z0-9._:-`},
	{"tenant too long", with(`"acme"`, `"`+strings.Repeat("a", 129)+`"`), nil, ReasonInvalidField, "tenant_id", "more than 128"},
	{"lowercase currency", with(`"USD"`, `"usd"`), nil, ReasonInvalidField, "currency", `"usd" must be 1-16 characters of A-Z0-9_`},
	{"long currency", with(`"USD"`, `"ABCDEFGHIJKLMNOPQ"`), nil, ReasonInvalidField, "currency", "must be 1-16 characters"},
	{"unknown kind", with(`"kind":"usage"`, `"kind":"charge"`), nil, ReasonInvalidField, "kind", `"charge" is not a kind; it must be one of usage, correction`},
	{"kind with prefix in plain mode", with(`"kind":"usage"`, `"kind":"com.acme.usage"`), nil, ReasonInvalidField, "kind", "is not a kind"},
	{"source too long", with(`"unit":"s"`, `"unit":"s","source":"`+strings.Repeat("s", 257)+`"`), nil, ReasonInvalidField, "source", "more than 256"},
	{"source number", with(`"unit":"s"`, `"unit":"s","source":7`), nil, ReasonInvalidField, "source", "must be a string"},
	{"attributes array", with(`"unit":"s"`, `"unit":"s","attributes":[1]`), nil, ReasonInvalidField, "attributes", "must be a JSON object, not a JSON array"},
	{"attributes NUL", with(`"unit":"s"`, `"unit":"s","attributes":{"a":"\u0000"}`), nil, ReasonInvalidField, "attributes", `\u0000`},
	{"attributes number too large", with(`"unit":"s"`, `"unit":"s","attributes":{"a":"1e9","b":[1,{"c":1e200000}]}`), nil, ReasonInvalidField, "attributes", "holds the number 1e200000, which JSON stores cannot hold"},
	{"attributes number too fine", with(`"unit":"s"`, `"unit":"s","attributes":{"a":-1e-16384}`), nil, ReasonInvalidField, "attributes", "holds the number -1e-16384"},

	// Versions.
	{"finalization_version string", with(`"finalization_version":1`, `"finalization_version":"2"`), nil, ReasonInvalidField, "finalization_version", "must be a JSON integer, not a JSON string"},
	{"finalization_version fraction", with(`"finalization_version":1`, `"finalization_version":1.5`), nil, ReasonInvalidField, "finalization_version", "1.5 must be a JSON integer, without fraction or exponent"},
	{"finalization_version 1.0", with(`"finalization_version":1`, `"finalization_version":1.0`), nil, ReasonInvalidField, "finalization_version", "without fraction or exponent"},
	{"finalization_version 1e0", with(`"finalization_version":1`, `"finalization_version":1e0`), nil, ReasonInvalidField, "finalization_version", "without fraction or exponent"},
	{"finalization_version 0", with(`"finalization_version":1`, `"finalization_version":0`), nil, ReasonInvalidField, "finalization_version", "0 must be at least 1"},
	{"finalization_version negative", with(`"finalization_version":1`, `"finalization_version":-3`), nil, ReasonInvalidField, "finalization_version", "must be at least 1"},
	{"finalization_version overflow", with(`"finalization_version":1`, `"finalization_version":9223372036854775808`), nil, ReasonInvalidField, "finalization_version", "is more than 9223372036854775807"},
	{"reversal bad version", strings.Replace(reversalJSON, `"corrects":"u-1"`, `"corrects":"u-1","finalization_version":true`, 1), nil, ReasonInvalidField, "finalization_version", "must be a JSON integer, not a JSON boolean"},

	// Times.
	{"time without zone", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05T11:04:05"`), nil, ReasonInvalidField, "occurred_at", "missing time zone offset"},
	{"time date only", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05"`), nil, ReasonInvalidField, "occurred_at", "is not an RFC 3339 time"},
	{"time space separator", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05 11:04:05Z"`), nil, ReasonInvalidField, "occurred_at", "the form is"},
	{"time February 30", with(`"2026-11-05T11:04:05Z"`, `"2026-02-30T11:04:05Z"`), nil, ReasonInvalidField, "occurred_at", "day out of range"},
	{"time hour 24", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05T24:00:00Z"`), nil, ReasonInvalidField, "occurred_at", "hour out of range"},
	{"time leap second", with(`"2026-11-05T11:04:05Z"`, `"2016-12-31T23:59:60Z"`), nil, ReasonInvalidField, "occurred_at", "leap seconds"},
	{"time 10 fraction digits", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05T11:04:05.1234567891Z"`), nil, ReasonInvalidField, "occurred_at", "more than 9 fraction digits"},
	{"time bad offset", with(`"2026-11-05T11:04:05Z"`, `"2026-11-05T11:04:05+0200"`), nil, ReasonInvalidField, "occurred_at", "offset must be Z or ±HH:MM"},
	{"time number", with(`"2026-11-05T11:04:05Z"`, `1762340645`), nil, ReasonInvalidField, "occurred_at", "must be an RFC 3339 string, not a JSON number"},
	{"time before year 0 in UTC", with(`"2026-11-05T11:04:05Z"`, `"0000-01-01T00:00:00+01:00"`), nil, ReasonInvalidField, "occurred_at", "outside years 0000-9999"},
	{"hold bad expires_at", strings.Replace(holdJSON, `"currency":"USD"`, `"currency":"USD","expires_at":"tomorrow"`, 1), nil, ReasonInvalidField, "expires_at", `"tomorrow" is not an RFC 3339 time`},

	// CloudEvents.
	{"ce data not an object", `{"specversion":"1.0","id":"u-1","source":"s","type":"usage","data":"{}"}`, nil, ReasonInvalidField, "data", "data: must be a JSON object, not a JSON string"},
	{"ce data missing", `{"specversion":"1.0","id":"u-1","source":"s","type":"usage"}`, nil, ReasonInvalidField, "data", "required"},
	{"ce data_base64", `{"specversion":"1.0","id":"u-1","source":"s","type":"usage","data_base64":"e30="}`, nil, ReasonInvalidField, "data_base64", "not supported"},
	{"ce wrong specversion", `{"specversion":"0.3","id":"u-1","source":"s","type":"usage","data":{}}`, nil, ReasonInvalidField, "specversion", `"0.3" must be "1.0"`},
	{"ce type not a kind", `{"specversion":"1.0","id":"u-1","source":"s","type":"com.acme.charge","tenantid":"acme","data":{"account_period":"2026-11"}}`, nil, ReasonInvalidField, "type", `"com.acme.charge" is not a kind; it must be one of usage`},
	{"ce missing id", `{"specversion":"1.0","source":"s","type":"hold_release","tenantid":"acme","subject":"a","time":"2026-11-05T11:04:05Z","data":{"account_period":"2026-11"}}`, nil, ReasonInvalidField, "id", "id: required"},
	{"ce attribute disagrees with data", `{"specversion":"1.0","id":"u-1","type":"hold_release","tenantid":"acme","data":{"tenant_id":"other","account_period":"2026-11"}}`, nil, ReasonInvalidField, "tenantid", `"acme" disagrees with data field tenant_id "other"`},
	{"ce time disagrees with data", `{"specversion":"1.0","id":"u-1","type":"hold_release","tenantid":"acme","subject":"a","time":"2026-11-05T11:04:05Z","data":{"account_period":"2026-11","occurred_at":"2026-11-05T12:04:05Z"}}`, nil, ReasonInvalidField, "time", `disagrees with data field occurred_at`},
	{"ce content type not JSON", `{"specversion":"1.0","id":"u-1","type":"usage","datacontenttype":"text/plain","data":{}}`, nil, ReasonInvalidField, "datacontenttype", "is not JSON"},
	{"binary ce missing ce_id", `{"account_period":"2026-11"}`, ceHeaders("ce_specversion", "1.0", "ce_type", "hold_release", "ce_tenantid", "acme", "ce_subject", "a", "ce_time", "2026-11-05T11:04:05Z"), ReasonInvalidField, "ce_id", "ce_id: required"},
	{"binary ce value not an object", `[1]`, ceHeaders("ce_specversion", "1.0", "ce_id", "u-1"), ReasonInvalidJSON, "record", "must be a JSON object"},
	{"binary ce value not JSON", `amount=40`, ceHeaders("ce_specversion", "1.0", "ce_id", "u-1"), ReasonInvalidJSON, "record", "invalid JSON"},
	{"binary ce duplicate header", `{}`, ceHeaders("ce_specversion", "1.0", "ce_id", "u-1", "ce_id", "u-2"), ReasonInvalidField, "ce_id", "appears more than once"},
	{"binary ce control char in header", `{"account_period":"2026-11"}`, ceHeaders("ce_specversion", "1.0", "ce_id", "u\r1", "ce_type", "x.hold_release", "ce_tenantid", "acme", "ce_subject", "a", "ce_time", "2026-11-05T11:04:05Z"), ReasonInvalidField, "ce_id", "control character U+000D"},
	{"binary ce invalid UTF-8 header", `{"account_period":"2026-11"}`, ceHeaders("ce_specversion", "1.0", "ce_id", "u-1", "ce_type", "x.hold_release", "ce_tenantid", "acme", "ce_subject", "a\xc3", "ce_time", "2026-11-05T11:04:05Z"), ReasonInvalidField, "ce_subject", "not valid UTF-8"},
	{"binary ce bad content type", `{}`, ceHeaders("ce_specversion", "1.0", "content-type", "application/avro"), ReasonInvalidField, "content-type", `"application/avro" is not JSON`},
}

func TestDecodeMalformed(t *testing.T) {
	t.Parallel()
	if len(malformedCases) < 30 {
		t.Fatalf("%d malformed cases, want at least 30", len(malformedCases))
	}
	d := newTestDecoder(t)
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := d.Decode([]byte(tc.value), tc.headers)
			if err == nil {
				t.Fatalf("decoded %+v, want %s error on %s", r, tc.reason, tc.field)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Reason != tc.reason || de.Field != tc.field || !strings.Contains(de.Error(), tc.msg) {
				t.Errorf("got reason=%s field=%s %q\nwant reason=%s field=%s containing %q", de.Reason, de.Field, de.Error(), tc.reason, tc.field, tc.msg)
			}
			if strings.ToLower(de.Msg[:1]) != de.Msg[:1] && de.Msg[0] != '"' {
				t.Errorf("message %q should start lowercase", de.Msg)
			}
		})
	}
}

// Every case must fail for its own reason: the same record without the
// fault decodes.
func TestMalformedBaseRecordsAreValid(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	for _, s := range []string{usageJSON, reversalJSON, holdJSON} {
		if _, err := d.Decode([]byte(s), nil); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

func TestDecodeTenants(t *testing.T) {
	t.Parallel()
	d, err := NewDecoder(Config{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode([]byte(usageJSON), nil); err != nil {
		t.Fatalf("configured tenant: %v", err)
	}
	_, err = d.Decode([]byte(with(`"acme"`, `"initech"`)), nil)
	var de *DecodeError
	if !errors.As(err, &de) || de.Reason != ReasonInvalidField || de.Field != "tenant_id" || !strings.Contains(de.Msg, "not one of the configured tenants") {
		t.Fatalf("unconfigured tenant: %v", err)
	}
}

// TestConfigValidate: the decoder refuses a negative or huge record size
// limit and bad tenant names, and a record over its limit is too_large.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{{RecordBytesMax: -1}, {RecordBytesMax: 1 << 30}, {Tenants: []string{"bad tenant"}}, {Tenants: []string{""}}} {
		if _, err := NewDecoder(c); err == nil {
			t.Errorf("NewDecoder(%+v) accepted", c)
		}
	}
	d, err := NewDecoder(Config{RecordBytesMax: 100})
	if err != nil {
		t.Fatal(err)
	}
	var de *DecodeError
	if _, err := d.Decode([]byte(usageJSON), nil); !errors.As(err, &de) || de.Reason != ReasonTooLarge {
		t.Fatalf("over a 100-byte limit: %v", err)
	}
}

func TestDecodeFields(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	in := with(`"unit":"s"`, `"unit":"s","hold_id":"h-1","hold_period":"2026-10","source":"agent","attributes": { "b" : [1, "x y"], "a":{} },"corrects":"ignored","expires_at":"2030-01-01T00:00:00Z"`)
	r, err := d.Decode([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.HoldID != "h-1" || r.HoldPeriod != "2026-10" || r.HoldTargetPeriod() != "2026-10" || r.Source != "agent" {
		t.Errorf("hold/source: %+v", r)
	}
	if got := string(r.Attributes); got != `{"b":[1,"x y"],"a":{}}` {
		t.Errorf("attributes %s, want compacted input", got)
	}
	if r.Corrects != "" || !r.ExpiresAt.IsZero() {
		t.Errorf("fields of other kinds must be left empty: %+v", r)
	}
	if r.OccurredAt.Location().String() != "UTC" || r.FinalizationVersion != 1 {
		t.Errorf("occurred_at %v, version %d", r.OccurredAt, r.FinalizationVersion)
	}
	if id := r.Identity(); id.String() != "tenant=acme period=2026-11 record=u-1 op=usage" {
		t.Errorf("identity %s", id)
	}
	// Decode must not retain the caller's buffer.
	buf := []byte(usageJSON)
	r, err = d.Decode(buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	if r.TenantID != "acme" || r.Subject != "acct-42" {
		t.Errorf("record changed with the input buffer: %+v", r)
	}
}

// TestJSONBNumbers: what PostgreSQL 15's jsonb holds ("value overflows
// numeric format" otherwise), tried there number by number:
// SELECT '{"a": N}'::jsonb.
func TestJSONBNumbers(t *testing.T) {
	t.Parallel()
	for n, holds := range map[string]bool{
		"1e1000": true, "1e131071": true, "1e131072": false, "1e200000": false,
		"1e-16383": true, "1e-16384": false, "1e-20000": false, "123456789e131064": false,
		"1.000e-16383": false, "1.000e-16380": true, "0.1e-16382": true, "0.1e-16383": false,
		"10e131070": true, "10e131071": false, "0.01e131073": true, "0.0e-20000": false, "0e200000": true,
		"-1E5": true, "0": true, "-0.5": true, "12.34E+2": true,
	} {
		if got := jsonbNumber(n); got != holds {
			t.Errorf("jsonbNumber(%s) = %v, want %v", n, got, holds)
		}
	}
}

func newTestDecoder(t testing.TB) *Decoder {
	t.Helper()
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
