package pgq

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/settlehq/settle/record"
)

// headerJSON is a Kafka header as every headers column stores it
// (values are bytes, so base64 in JSON). A key jsonb cannot hold as text
// byte for byte (not UTF-8, or holding a NUL, which Kafka allows) is
// KeyBytes, base64, beside an empty Key.
type headerJSON struct {
	Key      string `json:"key"`
	KeyBytes []byte `json:"key_bytes,omitempty"`
	Value    []byte `json:"value"`
}

// EncodeHeaders writes headers as every headers column holds them; the
// only writer of that form, as DecodeHeaders is its only reader.
func EncodeHeaders(hs []record.Header) []byte {
	out := make([]headerJSON, len(hs))
	for i, h := range hs {
		out[i] = headerJSON{Key: h.Key, Value: h.Value}
		if !utf8.ValidString(h.Key) || strings.IndexByte(h.Key, 0) >= 0 {
			out[i] = headerJSON{KeyBytes: []byte(h.Key), Value: h.Value}
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// DecodeHeaders reads a headers column (outbox, dead_letters, waiting
// operations): a JSON array of {key, value(base64)}. The outbox column's
// default '{}', null and nothing are no headers. None is an empty,
// non-nil slice, so that JSON shows [] and not null.
func DecodeHeaders(b []byte) ([]record.Header, error) {
	if len(b) == 0 || string(b) == "{}" || string(b) == "null" {
		return []record.Header{}, nil
	}
	if hs, ok := decodeHeadersFast(b); ok {
		return hs, nil
	}
	var in []headerJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	out := make([]record.Header, len(in))
	for i, h := range in {
		out[i] = record.Header{Key: h.Key, Value: h.Value}
		if h.KeyBytes != nil {
			out[i].Key = string(h.KeyBytes)
		}
	}
	return out, nil
}

// decodeHeadersFast reads headers as PostgreSQL prints the jsonb column,
// [{"key": "k", "value": "base64"}, ...], without reflection (it was a
// sixteenth of the relay's CPU). Anything else, including a key with an
// escape in it, is left to encoding/json: ok is false.
func decodeHeadersFast(b []byte) (hs []record.Header, ok bool) {
	const keyPrefix, valuePrefix = `{"key": "`, `", "value": "`
	if len(b) < 2 || b[0] != '[' {
		return nil, false
	}
	b = b[1:]
	if len(b) == 1 && b[0] == ']' {
		return []record.Header{}, true
	}
	for {
		if !bytes.HasPrefix(b, []byte(keyPrefix)) {
			return nil, false
		}
		b = b[len(keyPrefix):]
		i := bytes.IndexByte(b, '"')
		if i < 0 || bytes.IndexByte(b[:i], '\\') >= 0 {
			return nil, false
		}
		key := string(b[:i])
		b = b[i:]
		if !bytes.HasPrefix(b, []byte(valuePrefix)) {
			return nil, false
		}
		b = b[len(valuePrefix):]
		if i = bytes.IndexByte(b, '"'); i < 0 {
			return nil, false
		}
		v := make([]byte, base64.StdEncoding.DecodedLen(i))
		n, err := base64.StdEncoding.Decode(v, b[:i])
		if err != nil {
			return nil, false
		}
		hs = append(hs, record.Header{Key: key, Value: v[:n]})
		b = b[i+1:]
		switch {
		case len(b) == 2 && b[0] == '}' && b[1] == ']':
			return hs, true
		case len(b) > 3 && b[0] == '}' && b[1] == ',' && b[2] == ' ':
			b = b[3:]
		default:
			return nil, false
		}
	}
}
