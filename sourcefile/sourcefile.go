// Package sourcefile reads a source system's export of its records (the
// metering system's final usage records, for month end) in the input
// grammar: JSON lines, CSV with a header naming the contract's fields, or
// CloudEvents (structured, one per line, or a JSON batch array). Every
// record goes through the same record.Decoder as the usage topic's,
// so identities and canonical forms are settle's own.
//
// It reads a stream once, one record at a time, and holds one record in
// memory: exports of millions of lines are fine. It knows nothing of SQL.
package sourcefile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/inspect"
)

// Formats.
const (
	FormatAuto        = "auto"        // '[' a CloudEvents batch, '{' JSON lines, else CSV
	FormatJSONLines   = "jsonl"       // one record (or structured CloudEvent) per line
	FormatCSV         = "csv"         // a header row of field names, then one record per row
	FormatCloudEvents = "cloudevents" // structured CloudEvents, one per line or a JSON array
)

// Formats lists the accepted formats.
var Formats = []string{FormatAuto, FormatJSONLines, FormatCSV, FormatCloudEvents}

// csvFields are the columns a CSV header may name: the input record's
// fields (CONTRACT.md section 2).
var csvFields = map[string]bool{
	"tenant_id": true, "account_period": true, "record_id": true, "kind": true, "subject": true,
	"amount": true, "currency": true, "meter": true, "quantity": true, "unit": true, "occurred_at": true,
	"finalization_version": true, "corrects": true, "corrects_period": true, "hold_id": true, "hold_period": true,
	"expires_at": true, "source": true, "attributes": true,
}

// Reader yields the records of one export; it implements inspect.SourceLines.
type Reader struct {
	dec      *record.Decoder
	br       *bufio.Reader
	lineMax  int
	line     int64
	next     func() (inspect.SourceLine, error)
	csv      *csv.Reader
	header   []string
	batch    *json.Decoder
	scratch  bytes.Buffer
	finished bool
}

// New returns a Reader of r in format, decoding with dec. lineBytesMax
// bounds one line (a longer one is reported too_large and skipped); 0 =
// 1 MiB.
func New(r io.Reader, format string, dec *record.Decoder, lineBytesMax int) (*Reader, error) {
	if lineBytesMax == 0 {
		lineBytesMax = 1 << 20
	}
	rd := &Reader{dec: dec, br: bufio.NewReaderSize(r, 64<<10), lineMax: lineBytesMax}
	if format == FormatAuto {
		format = rd.sniff()
	}
	switch format {
	case FormatJSONLines:
		rd.next = rd.nextLine
	case FormatCloudEvents:
		if rd.sniff() == FormatCloudEvents {
			if err := rd.startBatch(); err != nil {
				return nil, err
			}
			rd.next = rd.nextBatch
		} else {
			rd.next = rd.nextLine
		}
	case FormatCSV:
		if err := rd.startCSV(); err != nil {
			return nil, err
		}
		rd.next = rd.nextCSV
	default:
		return nil, fmt.Errorf("source format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
	return rd, nil
}

// sniff looks at the first byte that is not white space.
func (rd *Reader) sniff() string {
	for n := 1; ; n++ {
		b, err := rd.br.Peek(n)
		if len(b) < n || err != nil {
			return FormatJSONLines // empty: nothing to read either way
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return FormatCloudEvents
		case '{':
			return FormatJSONLines
		}
		return FormatCSV
	}
}

// Next returns the next record; io.EOF at the end.
func (rd *Reader) Next() (inspect.SourceLine, error) { return rd.next() }

func (rd *Reader) decode(value []byte) inspect.SourceLine {
	rec, err := rd.dec.Decode(value, nil)
	if err != nil {
		return inspect.SourceLine{Line: rd.line, Err: err}
	}
	return inspect.SourceLine{Line: rd.line, Record: rec}
}

// nextLine reads one JSON line, skipping blank ones, never holding more
// than lineMax bytes of it.
func (rd *Reader) nextLine() (inspect.SourceLine, error) {
	for {
		rd.scratch.Reset()
		tooLong := false
		for {
			chunk, err := rd.br.ReadSlice('\n')
			if rd.scratch.Len()+len(chunk) > rd.lineMax {
				tooLong = true
			} else {
				rd.scratch.Write(chunk)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return inspect.SourceLine{}, fmt.Errorf("line %d: %w", rd.line+1, err)
			}
			if errors.Is(err, io.EOF) && rd.scratch.Len() == 0 && !tooLong && len(chunk) == 0 {
				return inspect.SourceLine{}, io.EOF
			}
			break
		}
		rd.line++
		if tooLong {
			return inspect.SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonTooLarge, Field: "record",
				Msg: fmt.Sprintf("line is longer than %d bytes", rd.lineMax)}}, nil
		}
		b := bytes.TrimSpace(rd.scratch.Bytes())
		if len(b) == 0 {
			continue
		}
		return rd.decode(b), nil
	}
}

func (rd *Reader) startBatch() error {
	rd.batch = json.NewDecoder(rd.br)
	tok, err := rd.batch.Token()
	if err != nil {
		return fmt.Errorf("cloudevents batch: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("cloudevents batch: want a JSON array")
	}
	return nil
}

func (rd *Reader) nextBatch() (inspect.SourceLine, error) {
	if rd.finished || !rd.batch.More() {
		rd.finished = true
		return inspect.SourceLine{}, io.EOF
	}
	var raw json.RawMessage
	if err := rd.batch.Decode(&raw); err != nil {
		return inspect.SourceLine{}, fmt.Errorf("cloudevents batch element %d: %w", rd.line+1, err)
	}
	rd.line++ // the element's position in the array
	return rd.decode(raw), nil
}

func (rd *Reader) startCSV() error {
	rd.csv = csv.NewReader(rd.br)
	rd.csv.ReuseRecord = true
	rd.csv.FieldsPerRecord = -1
	h, err := rd.csv.Read()
	if err != nil {
		return fmt.Errorf("csv header: %w", err)
	}
	rd.line = 1
	var unknown []string
	for _, name := range h {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		if !csvFields[name] {
			unknown = append(unknown, name)
		}
		rd.header = append(rd.header, name)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("csv header names %q, which are not fields of a record (want names such as tenant_id, account_period, record_id, kind, subject, amount)", unknown)
	}
	return nil
}

// nextCSV maps one row to the record's JSON fields and decodes it like a
// JSON line: an empty cell is an absent field, finalization_version is a
// JSON integer and attributes a JSON object when they are written as one.
func (rd *Reader) nextCSV() (inspect.SourceLine, error) {
	row, err := rd.csv.Read()
	if errors.Is(err, io.EOF) {
		return inspect.SourceLine{}, io.EOF
	}
	rd.line++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return inspect.SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonInvalidField, Field: "record", Msg: err.Error()}}, nil
		}
		return inspect.SourceLine{}, fmt.Errorf("csv line %d: %w", rd.line, err)
	}
	if len(row) != len(rd.header) {
		return inspect.SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonInvalidField, Field: "record",
			Msg: fmt.Sprintf("row has %d cells, the header %d", len(row), len(rd.header))}}, nil
	}
	rd.scratch.Reset()
	rd.scratch.WriteByte('{')
	first := true
	for i, v := range row {
		if v == "" {
			continue
		}
		if !first {
			rd.scratch.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(rd.header[i])
		rd.scratch.Write(k)
		rd.scratch.WriteByte(':')
		switch {
		case rd.header[i] == "finalization_version" && isDigits(v):
			rd.scratch.WriteString(v)
		case rd.header[i] == "attributes" && strings.HasPrefix(strings.TrimSpace(v), "{"):
			rd.scratch.WriteString(v)
		default:
			s, _ := json.Marshal(v)
			rd.scratch.Write(s)
		}
	}
	rd.scratch.WriteByte('}')
	return rd.decode(rd.scratch.Bytes()), nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
