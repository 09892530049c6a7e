package message

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Append-style JSON for the messages written once per record: the same
// bytes encoding/json gives (TestResponseAppendJSON holds them to it),
// without its reflection, which was a tenth of the service's CPU.

// AppendJSON appends r's JSON encoding to b.
func (r *Response) AppendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	b = AppendField(b, "outcome", string(r.Outcome))
	b = AppendOptional(b, "reason", r.Reason)
	b = AppendOptional(b, "detail", r.Detail)
	b = AppendOptional(b, "settlement_id", r.SettlementID)
	b = append(b, `,"identity":`...)
	b = r.Identity.AppendJSON(b)
	b = AppendField(b, "kind", r.Kind)
	b = AppendOptional(b, "subject", r.Subject)
	b = AppendOptional(b, "currency", r.Currency)
	if len(r.Entries) > 0 {
		b = append(b, `,"entries":[`...)
		for i, e := range r.Entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"bucket":`...)
			b = appendJSONString(b, e.Bucket)
			b = AppendField(b, "amount", e.Amount)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if l := r.Links; l != nil {
		b = append(b, `,"links":{`...)
		n := len(b)
		b = AppendOptional(b, "corrects", l.Corrects)
		b = AppendOptional(b, "root", l.Root)
		b = AppendOptional(b, "refund_target", l.RefundTarget)
		b = AppendOptional(b, "hold", l.Hold)
		b = AppendOptionalInt(b, "case", l.Case)
		if len(b) > n { // drop the first field's comma
			b = append(b[:n], b[n+1:]...)
		}
		b = append(b, '}')
	}
	b = AppendOptional(b, "balance_after", r.BalanceAfter)
	b = AppendOptional(b, "held_after", r.HeldAfter)
	b = AppendOptionalInt(b, "sequence", r.Sequence)
	b = AppendOptional(b, "chain_hash", r.ChainHash)
	b = AppendOptionalInt(b, "case_id", r.CaseID)
	b = append(b, `,"committed_at":`...)
	b = appendJSONTime(b, r.CommittedAt)
	if r.Late {
		b = append(b, `,"late":true`...)
	}
	if r.OccurredAt != nil {
		b = append(b, `,"occurred_at":`...)
		b = appendJSONTime(b, *r.OccurredAt)
	}
	if c := r.SourceRecord; c != nil {
		b = append(b, `,"source":`...)
		b = c.appendJSON(b)
	}
	return append(b, '}')
}

// AppendJSON appends id's JSON encoding to b.
func (id *IdentityJSON) AppendJSON(b []byte) []byte {
	b = append(b, `{"tenant_id":`...)
	b = appendJSONString(b, id.TenantID)
	b = AppendField(b, "account_period", id.AccountPeriod)
	b = AppendField(b, "record_id", id.RecordID)
	b = AppendField(b, "operation", id.Operation)
	return append(b, '}')
}

func (c *Coordinates) appendJSON(b []byte) []byte {
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, c.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(c.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, c.Offset, 10)
	return append(b, '}')
}

// AppendJSON appends r's JSON encoding to b. The stored response is spliced
// in as it is: this service wrote it, compact.
func (r *Result) AppendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	b = append(b, `,"source":`...)
	b = r.Source.appendJSON(b)
	if r.Identity != nil {
		b = append(b, `,"identity":`...)
		b = r.Identity.AppendJSON(b)
	}
	b = AppendField(b, "outcome", string(r.Outcome))
	b = AppendOptional(b, "reason", r.Reason)
	b = AppendOptional(b, "error", r.Error)
	b = AppendOptionalInt(b, "case_id", r.CaseID)
	if r.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	if r.Redelivered {
		b = append(b, `,"redelivered":true`...)
	}
	if len(r.Response) > 0 {
		b = append(b, `,"response":`...)
		b = append(b, r.Response...)
	}
	return append(b, '}')
}

// AppendField appends ,"name":"value".
func AppendField(b []byte, name, v string) []byte {
	return appendJSONString(appendKey(b, name), v)
}

// appendKey appends ,"name":.
func appendKey(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// AppendOptional appends ,"name":"value" unless value is empty (omitempty).
func AppendOptional(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return AppendField(b, name, v)
}

// AppendOptionalInt appends ,"name":v unless v is 0 (omitempty).
func AppendOptionalInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(appendKey(b, name), v, 10)
}

// appendJSONTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted).
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes a string: <, >
// and & escaped (HTML-safe), control characters escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
