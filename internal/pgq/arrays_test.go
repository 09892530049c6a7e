package pgq_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/settletest"
)

// arrayCases are the arrays the settling statements bind, at their edges:
// NULL (a nil slice), empty, one element, empty and multi-byte strings,
// NULL and empty bytea elements, and a batch's length.
func arrayCases() []any {
	long := make([]string, 1000)
	ids := make([]int64, 1000)
	for i := range long {
		long[i] = fmt.Sprintf("u-s-%d-%d", i, i*7919%100000)
		ids[i] = int64(i)*1_000_003 - 500_000_000
	}
	return []any{
		[]string(nil), []string{}, []string{"t-1"}, []string{"", "é€😀", strings.Repeat("x", 300)}, long,
		[]int64(nil), []int64{}, []int64{0}, []int64{-1, 1 << 62, -1 << 63}, ids,
		[][]byte(nil), [][]byte{}, [][]byte{nil}, [][]byte{{}, nil, []byte("canonical"), {0, 0xff}},
	}
}

func arrayOID(v any) uint32 {
	switch v.(type) {
	case []string:
		return pgtype.TextArrayOID
	case []int64:
		return pgtype.Int8ArrayOID
	default:
		return pgtype.ByteaArrayOID
	}
}

// TestArraysEncodeAsPgx: the arrays are encoded to the bytes pgx's own
// plan writes, NULL elements and all, and with one allocation at most for a
// batch's array (pgx's plan makes one per text element). Seen failing with
// the header's NULL flag never set and with a lower bound of 0.
func TestArraysEncodeAsPgx(t *testing.T) { // not parallel: AllocsPerRun
	plain, fast := pgtype.NewMap(), pgtype.NewMap()
	pgq.FastArrays(fast)
	pgq.FastArrays(fast) // twice is once
	for _, v := range arrayCases() {
		oid := arrayOID(v)
		want, err := plain.Encode(oid, pgtype.BinaryFormatCode, v, []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fast.Encode(oid, pgtype.BinaryFormatCode, v, []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%T of %d: encoded\n%x\nwant\n%x", v, reflect.ValueOf(v).Len(), got, want)
		}
	}
	long := arrayCases()[4]
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(20, func() {
		_, _ = fast.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, long, buf[:0])
	}); n > 1 {
		t.Errorf("a text array of 1,000 elements took %.0f allocations to encode", n)
	}
}

// BenchmarkArrays: a batch's text and bigint arrays (1,000 elements) by
// pgx's generic plan and by db's (the figures in arrays.go and in
// `git show aba77c0:BENCHMARKS.md`, "What each change bought").
func BenchmarkArrays(b *testing.B) {
	cases := arrayCases()
	for _, fast := range []bool{false, true} {
		m := pgtype.NewMap()
		if fast {
			pgq.FastArrays(m)
		}
		for _, v := range []any{cases[4], cases[9]} {
			b.Run(fmt.Sprintf("%T/db=%v", v, fast), func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					buf, _ = m.Encode(arrayOID(v), pgtype.BinaryFormatCode, v, buf[:0])
				}
			})
		}
	}
}

// TestArraysRoundTrip: PostgreSQL reads the arrays a settling transaction
// binds as they were meant, NULL elements as NULL.
// Seen failing with the header's NULL flag never set and with a lower bound
// of 0.
func TestArraysRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 1)
	tx, err := pgq.Begin(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, v := range arrayCases() {
		var nulls, length int
		var isNull bool
		typ := map[uint32]string{pgtype.TextArrayOID: "text[]", pgtype.Int8ArrayOID: "bigint[]", pgtype.ByteaArrayOID: "bytea[]"}[arrayOID(v)]
		if err := tx.QueryRow(ctx, `SELECT $1::`+typ+` IS NULL, coalesce(cardinality($1), 0),
			coalesce((SELECT count(*) FROM unnest($1) e WHERE e IS NULL), 0)`, v).Scan(&isNull, &length, &nulls); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		rv := reflect.ValueOf(v)
		wantNulls := 0
		if bs, ok := v.([][]byte); ok {
			for _, b := range bs {
				if b == nil {
					wantNulls++
				}
			}
		}
		if isNull != rv.IsNil() || length != rv.Len() || nulls != wantNulls {
			t.Errorf("%T of %d: PostgreSQL read null %v, %d elements, %d NULL", v, rv.Len(), isNull, length, nulls)
		}
		back := reflect.New(rv.Type())
		if err := tx.QueryRow(ctx, "SELECT $1::"+typ, v).Scan(back.Interface()); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if got := back.Elem().Interface(); rv.Len() > 0 && !reflect.DeepEqual(got, v) {
			t.Errorf("%T of %d: read back %v", v, rv.Len(), got)
		}
	}
}
