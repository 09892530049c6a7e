package pgq

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The two COPYs of a settling transaction (identities, ledger entries)
// carry its widest rows. pgx's CopyFrom encodes every value through its
// type map, in a goroutine of its own: each boxed in an interface by the
// generated iterator and its plan looked up again, ≈ a tenth of the
// service's CPU in a core-only profile (BENCHMARKS.md). Their rows
// are encoded here instead, in the caller's goroutine, in PostgreSQL's
// binary COPY format, straight from the generated parameter structs, and
// sent by pgconn's COPY (TestCopyWritesAsPgx: the same rows as pgx's
// CopyFrom writes).

// CopyRows is a generated COPY iterator whose rows encode themselves: Tx
// sends them in PostgreSQL's binary COPY format, any other source through
// pgx's CopyFrom.
type CopyRows interface {
	AppendRows(w *CopyWriter) error
}

// copyFrom runs COPY ... FROM STDIN BINARY of src's rows on conn.
func copyFrom(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, columns []string, src CopyRows) (int64, error) {
	w, _ := copyWriters.Get().(*CopyWriter) // the pool holds nothing else
	defer w.release()
	w.m = conn.TypeMap()
	w.buf = append(w.buf[:0], "PGCOPY\n\377\r\n\000"...)
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // flags
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // header extension
	if err := src.AppendRows(w); err != nil {
		return 0, err
	}
	w.buf = binary.BigEndian.AppendUint16(w.buf, 0xFFFF) // trailer
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(w.buf),
		fmt.Sprintf("COPY %s ( %s ) FROM STDIN BINARY", table.Sanitize(), strings.Join(quoted, ", ")))
	return tag.RowsAffected(), err
}

// CopyWriter appends rows in PostgreSQL's binary COPY format.
type CopyWriter struct {
	buf []byte
	m   *pgtype.Map // for what is not encoded here (numeric)
}

var copyWriters = sync.Pool{New: func() any { return &CopyWriter{} }}

// copyBufferKeptMax is the largest buffer a writer keeps for the next COPY
// (a batch of 1,000 identities is ≈ 1 MB).
const copyBufferKeptMax = 4 << 20

func (w *CopyWriter) release() {
	if cap(w.buf) > copyBufferKeptMax {
		w.buf = nil
	}
	w.m = nil
	copyWriters.Put(w)
}

// Row starts a row of fields values.
func (w *CopyWriter) Row(fields int) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(fields)) }

// Null appends a NULL.
func (w *CopyWriter) Null() { w.buf = binary.BigEndian.AppendUint32(w.buf, 0xFFFFFFFF) }

// Int2 appends a smallint.
func (w *CopyWriter) Int2(v int16) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 2)
	w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v))
}

// Int4 appends an integer.
func (w *CopyWriter) Int4(v int32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
}

// Int8 appends a bigint.
func (w *CopyWriter) Int8(v int64) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
}

// Int8p appends a bigint; nil is NULL.
func (w *CopyWriter) Int8p(v *int64) {
	if v == nil {
		w.Null()
		return
	}
	w.Int8(*v)
}

// Text appends a text.
func (w *CopyWriter) Text(s string) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(s)))
	w.buf = append(w.buf, s...)
}

// Textp appends a text; nil is NULL.
func (w *CopyWriter) Textp(s *string) {
	if s == nil {
		w.Null()
		return
	}
	w.Text(*s)
}

// Bytes appends a bytea or a json (whose binary form is its text); nil
// is NULL.
func (w *CopyWriter) Bytes(b []byte) {
	if b == nil {
		w.Null()
		return
	}
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(b)))
	w.buf = append(w.buf, b...)
}

// Jsonb appends a jsonb, whose binary form is a version byte (1) and the
// text; nil is NULL.
func (w *CopyWriter) Jsonb(b []byte) {
	if b == nil {
		w.Null()
		return
	}
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(1+len(b)))
	w.buf = append(w.buf, 1)
	w.buf = append(w.buf, b...)
}

// y2k is PostgreSQL's timestamp epoch, in microseconds after Unix's.
const y2k = 946_684_800_000_000

// Timestamptz appends a timestamptz, to the microsecond.
func (w *CopyWriter) Timestamptz(t time.Time) {
	w.Int8(t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - y2k)
}

// Numeric appends a numeric: a coefficient that fits in 64 bits (every amount settle
// writes) is encoded here; any other goes through pgx's own plan.
func (w *CopyWriter) Numeric(n pgtype.Numeric) error {
	if b, ok := appendNumeric(w.buf, n); ok {
		w.buf = b
		return nil
	}
	at := len(w.buf)
	w.buf = append(w.buf, 0, 0, 0, 0)
	out, err := w.m.Encode(pgtype.NumericOID, pgtype.BinaryFormatCode, n, w.buf)
	if err != nil {
		return err
	}
	if out == nil { // NULL
		w.buf = binary.BigEndian.AppendUint32(w.buf[:at], 0xFFFFFFFF)
		return nil
	}
	w.buf = out
	binary.BigEndian.PutUint32(w.buf[at:], uint32(len(w.buf)-at-4))
	return nil
}

// appendNumeric appends n as a field of PostgreSQL's binary numeric: its
// digits in base 10,000, most significant first, the weight of the first,
// the sign and the display scale (the decimals of n.Exp, as pgx sends
// them). It does not for what does not fit a 64-bit coefficient.
func appendNumeric(buf []byte, n pgtype.Numeric) ([]byte, bool) {
	if !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite || n.Int == nil || !n.Int.IsInt64() ||
		n.Exp < -1000 || n.Exp > 1000 {
		return buf, false
	}
	v := n.Int.Int64()
	var sign uint16
	abs := uint64(v)
	if v < 0 {
		sign, abs = 0x4000, uint64(-v) // -MinInt64 wraps to its own magnitude
	}
	// The coefficient scaled so that the exponent is a multiple of 4.
	shift := ((n.Exp % 4) + 4) % 4
	for range shift {
		if abs > math.MaxUint64/10 {
			return buf, false
		}
		abs *= 10
	}
	weight := (n.Exp - shift) / 4 // of the least significant digit
	var digits [5]uint16          // least significant first
	nd := 0
	for ; abs > 0; abs /= 10000 {
		d := uint16(abs % 10000)
		if nd == 0 && d == 0 {
			weight++ // trailing zero digits are left out
			continue
		}
		digits[nd] = d
		nd++
	}
	if nd == 0 {
		weight = 0
	} else {
		weight += int32(nd) - 1
	}
	dscale := int16(0)
	if n.Exp < 0 {
		dscale = int16(-n.Exp)
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(8+2*nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(nd))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, sign)
	buf = binary.BigEndian.AppendUint16(buf, uint16(dscale))
	for i := nd - 1; i >= 0; i-- {
		buf = binary.BigEndian.AppendUint16(buf, digits[i])
	}
	return buf, true
}
