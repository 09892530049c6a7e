package db

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

// copyRows is a generated COPY iterator whose rows encode themselves.
type copyRows interface {
	appendRows(w *copyWriter) error
}

// copyFrom runs COPY ... FROM STDIN BINARY of src's rows on conn.
func copyFrom(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, columns []string, src copyRows) (int64, error) {
	w, _ := copyWriters.Get().(*copyWriter) // the pool holds nothing else
	defer w.release()
	w.m = conn.TypeMap()
	w.buf = append(w.buf[:0], "PGCOPY\n\377\r\n\000"...)
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // flags
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // header extension
	if err := src.appendRows(w); err != nil {
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

// copyWriter appends rows in PostgreSQL's binary COPY format.
type copyWriter struct {
	buf []byte
	m   *pgtype.Map // for what is not encoded here (numeric)
}

var copyWriters = sync.Pool{New: func() any { return &copyWriter{} }}

// copyBufferKeptMax is the largest buffer a writer keeps for the next COPY
// (a batch of 1,000 identities is ≈ 1 MB).
const copyBufferKeptMax = 4 << 20

func (w *copyWriter) release() {
	if cap(w.buf) > copyBufferKeptMax {
		w.buf = nil
	}
	w.m = nil
	copyWriters.Put(w)
}

func (w *copyWriter) row(fields int) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(fields)) }

func (w *copyWriter) null() { w.buf = binary.BigEndian.AppendUint32(w.buf, 0xFFFFFFFF) }

func (w *copyWriter) int2(v int16) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 2)
	w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v))
}

func (w *copyWriter) int4(v int32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
}

func (w *copyWriter) int8(v int64) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, 8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
}

func (w *copyWriter) int8p(v *int64) {
	if v == nil {
		w.null()
		return
	}
	w.int8(*v)
}

func (w *copyWriter) text(s string) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *copyWriter) textp(s *string) {
	if s == nil {
		w.null()
		return
	}
	w.text(*s)
}

// bytea and json (whose binary form is its text); nil is NULL.
func (w *copyWriter) bytes(b []byte) {
	if b == nil {
		w.null()
		return
	}
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(b)))
	w.buf = append(w.buf, b...)
}

// jsonb's binary form is a version byte (1) and the text; nil is NULL.
func (w *copyWriter) jsonb(b []byte) {
	if b == nil {
		w.null()
		return
	}
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(1+len(b)))
	w.buf = append(w.buf, 1)
	w.buf = append(w.buf, b...)
}

// y2k is PostgreSQL's timestamp epoch, in microseconds after Unix's.
const y2k = 946_684_800_000_000

func (w *copyWriter) timestamptz(t time.Time) {
	w.int8(t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - y2k)
}

// numeric: a coefficient that fits in 64 bits (every amount settle
// writes) is encoded here; any other goes through pgx's own plan.
func (w *copyWriter) numeric(n pgtype.Numeric) error {
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

// The generated iterators' rows, in the order of their COPY's columns
// (copyfrom.go, from identity_copy.sql and ledger_entry_copy.sql).

func (r *iteratorForIdentityCopy) appendRows(w *copyWriter) error {
	for i := range r.rows {
		p := &r.rows[i]
		w.row(25)
		w.int8(p.ID)
		w.text(p.TenantID)
		w.text(p.AccountPeriod)
		w.text(p.RecordID)
		w.text(p.Operation)
		w.int8(p.Fingerprint)
		w.int2(p.CanonicalVersion)
		w.bytes(p.Canonical)
		w.text(p.Outcome)
		w.text(p.Reason)
		w.bytes(p.Response)
		w.textp(p.SettlementID)
		w.int8p(p.AccountID)
		w.int8p(p.RootID)
		w.text(p.Source)
		w.jsonb(p.Attributes)
		w.text(p.Topic)
		w.int4(p.Partition)
		w.int8(p.Offset)
		w.timestamptz(p.FirstSeenAt)
		w.timestamptz(p.LastAttemptedAt)
		w.int4(p.Attempts)
		w.text(p.Subject)
		w.text(p.Currency)
		w.int8p(p.TargetID)
	}
	return nil
}

func (r *iteratorForLedgerEntryCopy) appendRows(w *copyWriter) error {
	for i := range r.rows {
		p := &r.rows[i]
		w.row(10)
		w.int8(p.ID)
		w.int8(p.IdentityID)
		w.int8(p.AccountID)
		w.text(p.TenantID)
		w.text(p.Bucket)
		if err := w.numeric(p.Amount); err != nil {
			return err
		}
		w.bytes(p.ChainHash)
		w.int8p(p.Seq)
		if err := w.numeric(p.BalanceAfter); err != nil {
			return err
		}
		if err := w.numeric(p.HeldAfter); err != nil {
			return err
		}
	}
	return nil
}
