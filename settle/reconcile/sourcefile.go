package reconcile

// Reading a source system's export of its records (the metering system's
// final usage records, for month end) in the input grammar: JSON lines,
// CSV with a header naming the contract's fields, or CloudEvents (structured, one per line, or a JSON batch array). Every
// record goes through the same record.Decoder as the usage topic's,
// so identities and canonical forms are settle's own.
//
// It reads a stream once, one record at a time, and holds one record in
// memory: exports of millions of lines are fine. It knows nothing of SQL.

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
)

// Source export formats.
const (
	SourceFormatAuto        = "auto"        // '[' a CloudEvents batch, '{' JSON lines, else CSV
	SourceFormatJSONLines   = "jsonl"       // one record (or structured CloudEvent) per line
	SourceFormatCSV         = "csv"         // a header row of field names, then one record per row
	SourceFormatCloudEvents = "cloudevents" // structured CloudEvents, one per line or a JSON array
)

// SourceFormats lists the accepted formats.
var SourceFormats = []string{SourceFormatAuto, SourceFormatJSONLines, SourceFormatCSV, SourceFormatCloudEvents}

// csvFields are the columns a CSV header may name: the input record's
// fields (CONTRACT.md section 2).
var csvFields = map[string]bool{
	"tenant_id": true, "account_period": true, "record_id": true, "kind": true, "subject": true,
	"amount": true, "currency": true, "meter": true, "quantity": true, "unit": true, "occurred_at": true,
	"finalization_version": true, "corrects": true, "corrects_period": true, "hold_id": true, "hold_period": true,
	"expires_at": true, "source": true, "attributes": true,
}

// SourceReader yields the records of one export; it implements SourceLines.
type SourceReader struct {
	dec      *record.Decoder
	br       *bufio.Reader
	lineMax  int
	line     int64
	next     func() (SourceLine, error)
	csv      *csv.Reader
	header   []string
	batch    *json.Decoder
	scratch  bytes.Buffer
	finished bool
}

// NewSourceReader returns a SourceReader of r in format, decoding with dec. lineBytesMax
// bounds one line (a longer one is reported too_large and skipped); 0 =
// 1 MiB.
func NewSourceReader(r io.Reader, format string, dec *record.Decoder, lineBytesMax int) (*SourceReader, error) {
	if lineBytesMax == 0 {
		lineBytesMax = 1 << 20
	}
	rd := &SourceReader{dec: dec, br: bufio.NewReaderSize(r, 64<<10), lineMax: lineBytesMax}
	if format == SourceFormatAuto {
		format = rd.sniff()
	}
	switch format {
	case SourceFormatJSONLines:
		rd.next = rd.nextLine
	case SourceFormatCloudEvents:
		if rd.sniff() == SourceFormatCloudEvents {
			if err := rd.startBatch(); err != nil {
				return nil, err
			}
			rd.next = rd.nextBatch
		} else {
			rd.next = rd.nextLine
		}
	case SourceFormatCSV:
		if err := rd.startCSV(); err != nil {
			return nil, err
		}
		rd.next = rd.nextCSV
	default:
		return nil, fmt.Errorf("source format %q: want one of %s", format, strings.Join(SourceFormats, ", "))
	}
	return rd, nil
}

// sniff looks at the first byte that is not white space.
func (rd *SourceReader) sniff() string {
	for n := 1; ; n++ {
		b, err := rd.br.Peek(n)
		if len(b) < n || err != nil {
			return SourceFormatJSONLines // empty: nothing to read either way
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return SourceFormatCloudEvents
		case '{':
			return SourceFormatJSONLines
		}
		return SourceFormatCSV
	}
}

// Next returns the next record; io.EOF at the end.
func (rd *SourceReader) Next() (SourceLine, error) { return rd.next() }

func (rd *SourceReader) decode(value []byte) SourceLine {
	rec, err := rd.dec.Decode(value, nil)
	if err != nil {
		return SourceLine{Line: rd.line, Err: err}
	}
	return SourceLine{Line: rd.line, Record: rec}
}

// nextLine reads one JSON line, skipping blank ones, never holding more
// than lineMax bytes of it.
func (rd *SourceReader) nextLine() (SourceLine, error) {
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
				return SourceLine{}, fmt.Errorf("line %d: %w", rd.line+1, err)
			}
			if errors.Is(err, io.EOF) && rd.scratch.Len() == 0 && !tooLong && len(chunk) == 0 {
				return SourceLine{}, io.EOF
			}
			break
		}
		rd.line++
		if tooLong {
			return SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonTooLarge, Field: "record",
				Msg: fmt.Sprintf("line is longer than %d bytes", rd.lineMax)}}, nil
		}
		b := bytes.TrimSpace(rd.scratch.Bytes())
		if len(b) == 0 {
			continue
		}
		return rd.decode(b), nil
	}
}

func (rd *SourceReader) startBatch() error {
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

func (rd *SourceReader) nextBatch() (SourceLine, error) {
	if rd.finished || !rd.batch.More() {
		rd.finished = true
		return SourceLine{}, io.EOF
	}
	var raw json.RawMessage
	if err := rd.batch.Decode(&raw); err != nil {
		return SourceLine{}, fmt.Errorf("cloudevents batch element %d: %w", rd.line+1, err)
	}
	rd.line++ // the element's position in the array
	return rd.decode(raw), nil
}

func (rd *SourceReader) startCSV() error {
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
func (rd *SourceReader) nextCSV() (SourceLine, error) {
	row, err := rd.csv.Read()
	if errors.Is(err, io.EOF) {
		return SourceLine{}, io.EOF
	}
	rd.line++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonInvalidField, Field: "record", Msg: err.Error()}}, nil
		}
		return SourceLine{}, fmt.Errorf("csv line %d: %w", rd.line, err)
	}
	if len(row) != len(rd.header) {
		return SourceLine{Line: rd.line, Err: &record.DecodeError{Reason: record.ReasonInvalidField, Field: "record",
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
