package pgq

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"
)

// The settling statements bind a batch as arrays, a few per record
// ([]string, []int64, [][]byte). pgx encodes an array through its generic
// plan: every element boxed in an interface (an allocation for each string)
// and its plan looked up again, ≈ 30 ns and an allocation per text element
// (BenchmarkArrays: go test -run '^$' -bench Arrays ./internal/pgq/).
// arrayCodec encodes these three slice types in one pass instead, each
// element appended where it goes, the same bytes pgx's plan writes
// (TestArraysEncodeAsPgx); any other value goes to the codec it wraps.
type arrayCodec struct {
	pgtype.Codec
	elem uint32 // the element type's OID
}

func (c arrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case []string:
			if c.elem == pgtype.TextOID {
				return textArray{}
			}
		case []int64:
			if c.elem == pgtype.Int8OID {
				return int8Array{}
			}
		case [][]byte:
			if c.elem == pgtype.ByteaOID {
				return byteaArray{}
			}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// FastArrays registers arrayCodec for text[], bigint[] and bytea[] on a
// connection's type map, once: the settling transactions (Begin) and
// the relay's connection (outbox.Lease) call it on theirs.
func FastArrays(m *pgtype.Map) {
	if t, ok := m.TypeForOID(pgtype.TextArrayOID); !ok || isArrayCodec(t) {
		return
	}
	for _, oid := range [...]uint32{pgtype.TextArrayOID, pgtype.Int8ArrayOID, pgtype.ByteaArrayOID} {
		t, ok := m.TypeForOID(oid)
		if !ok {
			continue
		}
		ac, ok := t.Codec.(*pgtype.ArrayCodec)
		if !ok {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: arrayCodec{Codec: ac, elem: ac.ElementType.OID}})
	}
}

func isArrayCodec(t *pgtype.Type) bool {
	_, ok := t.Codec.(arrayCodec)
	return ok
}

// arrayHeader appends the header of a one-dimensional array of n elements
// of type elem, lower bound 1, as PostgreSQL's array_recv reads it.
func arrayHeader(buf []byte, n int, elem uint32, nulls bool) []byte {
	var hasNull uint32
	if nulls {
		hasNull = 1
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, hasNull)
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1)
}

const arrayHeaderLen = 20

// A nil slice is NULL (a nil buffer, as pgx's plans answer it).

type textArray struct{}

func (textArray) Encode(value any, buf []byte) ([]byte, error) {
	a, ok := value.([]string)
	if !ok {
		return nil, notPlanned(value)
	}
	if a == nil {
		return nil, nil
	}
	n := arrayHeaderLen
	for _, s := range a {
		n += 4 + len(s)
	}
	buf = slices.Grow(buf, n)
	buf = arrayHeader(buf, len(a), pgtype.TextOID, false)
	for _, s := range a {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

type int8Array struct{}

func (int8Array) Encode(value any, buf []byte) ([]byte, error) {
	a, ok := value.([]int64)
	if !ok {
		return nil, notPlanned(value)
	}
	if a == nil {
		return nil, nil
	}
	buf = slices.Grow(buf, arrayHeaderLen+12*len(a))
	buf = arrayHeader(buf, len(a), pgtype.Int8OID, false)
	for _, v := range a {
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(v))
	}
	return buf, nil
}

type byteaArray struct{}

func (byteaArray) Encode(value any, buf []byte) ([]byte, error) {
	a, ok := value.([][]byte)
	if !ok {
		return nil, notPlanned(value)
	}
	if a == nil {
		return nil, nil
	}
	n, nulls := arrayHeaderLen, false
	for _, b := range a {
		n += 4 + len(b)
		nulls = nulls || b == nil
	}
	buf = slices.Grow(buf, n)
	buf = arrayHeader(buf, len(a), pgtype.ByteaOID, nulls)
	for _, b := range a {
		if b == nil {
			buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) // -1: NULL
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	return buf, nil
}

// notPlanned is the error of a plan given a value it was not planned for
// (pgx plans by the value's type, so never).
func notPlanned(v any) error { return fmt.Errorf("db: array plan given %T", v) }
