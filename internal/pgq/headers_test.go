package pgq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/settletest"
)

// TestDecodeHeadersFast: headers printed by PostgreSQL from a jsonb column
// decode to the same headers by the fast path as by encoding/json, and the
// fast path takes every plain key (a key with an escape falls back).
func TestDecodeHeadersFast(t *testing.T) {
	t.Parallel()
	pool := settletest.NewPool(t, 2)
	rng := rand.New(rand.NewPCG(7, 11))
	keys := []string{"settlement_id", "traceparent", "", "k", `quo"te`, `back\slash`, "ünï", "tab\tkey", "<&>"}
	for trial := range 300 {
		type hj struct {
			Key   string `json:"key"`
			Value []byte `json:"value"`
		}
		hs := make([]hj, rng.IntN(6))
		plain := true
		for i := range hs {
			hs[i].Key = keys[rng.IntN(len(keys))]
			if n := rng.IntN(40); n > 0 || rng.IntN(2) == 0 {
				hs[i].Value = make([]byte, n)
				for j := range hs[i].Value {
					hs[i].Value[j] = byte(rng.IntN(256))
				}
			}
			if bytes.ContainsAny([]byte(hs[i].Key), "\"\\\t") || hs[i].Value == nil {
				plain = false
			}
		}
		in, err := json.Marshal(hs)
		if err != nil {
			t.Fatal(err)
		}
		var printed []byte
		if err := pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(in)).Scan(&printed); err != nil {
			t.Fatal(err)
		}
		want := make([]record.Header, len(hs)) // what was stored, not what came back
		for i, h := range hs {
			want[i] = record.Header{Key: h.Key, Value: h.Value}
		}
		if all, err := pgq.DecodeHeaders(printed); err != nil || !sameHeaders(all, want) {
			t.Errorf("trial %d: DecodeHeaders(%s) = %q, %v", trial, printed, all, err)
		}
		got, ok := pgq.DecodeHeadersFast(printed)
		if plain && !ok {
			t.Errorf("trial %d: fast path refused plain headers %s", trial, printed)
		}
		if ok && !sameHeaders(got, want) {
			t.Errorf("trial %d: %s\nfast %q\njson %q", trial, printed, got, want)
		}
	}
}

func sameHeaders(a, b []record.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// A null value and an empty one are different Kafka headers.
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) || (a[i].Value == nil) != (b[i].Value == nil) {
			return false
		}
	}
	return true
}

// TestDecodeHeadersNone: every form a headers column says "none" in (the
// outbox default '{}', an empty array, null, nothing) decodes to no
// headers, shown as [] in JSON; anything else that is not an array of
// headers is an error.
func TestDecodeHeadersNone(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "{}", "null", "[]"} {
		hs, err := pgq.DecodeHeaders([]byte(in))
		if b, _ := json.Marshal(hs); err != nil || string(b) != "[]" {
			t.Errorf("DecodeHeaders(%q) = %s, %v; want [], nil", in, b, err)
		}
	}
	for _, in := range []string{`{"key": "k"}`, `[1]`, `"k"`} {
		if hs, err := pgq.DecodeHeaders([]byte(in)); err == nil {
			t.Errorf("DecodeHeaders(%q) = %q, want an error", in, hs)
		}
	}
}

// TestHeaderKeysAnyBytes: Kafka header keys are bytes. A key with a NUL
// (which jsonb refuses as \u0000, so the row holding it could not be
// written) or not UTF-8 (which encoding/json turned into U+FFFD) goes
// through a jsonb column and comes back byte for byte.
func TestHeaderKeysAnyBytes(t *testing.T) {
	t.Parallel()
	pool := settletest.NewPool(t, 2)
	hs := []record.Header{{Key: "trace\x00id", Value: []byte("v")}, {Key: "x\xffi", Value: []byte{0}}, {Key: "plain", Value: nil},
		{Key: "", Value: []byte("empty key")}}
	var printed []byte
	if err := pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(pgq.EncodeHeaders(hs))).Scan(&printed); err != nil {
		t.Fatal(err)
	}
	got, err := pgq.DecodeHeaders(printed)
	if err != nil || !sameHeaders(got, hs) {
		t.Fatalf("DecodeHeaders(%s) = %q, %v; want %q", printed, got, err, hs)
	}
}
