package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/text/unicode/norm"

	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/record"
)

// produceCmd publishes JSON lines to a topic, keyed like producers key
// usage records, so that one account's records share a partition.
type produceCmd struct {
	kafkaFlags `embed:""`

	Topic          string        `name:"topic" env:"SETTLE_PRODUCE_TOPIC" default:"usage" help:"Topic to publish to."`
	Timeout        time.Duration `name:"timeout" env:"SETTLE_PRODUCE_TIMEOUT" default:"30s" help:"Give up when the brokers have not taken every record by then."`
	PublishInvalid bool          `name:"publish-invalid" help:"Publish lines that are not valid records too (the service dead-letters them); by default they are reported and left out."`
	LineBytesMax   int           `name:"line-bytes-max" hidden:"" env:"SETTLE_LINE_BYTES_MAX" default:"1048576" help:"Longest line accepted, in bytes."`
	RecordBytesMax int           `name:"record-bytes-max" hidden:"" env:"SETTLE_RECORD_BYTES_MAX" default:"65536" help:"Largest record value the service accepts; longer lines are reported as not valid."`
	File           string        `arg:"" optional:"" default:"-" help:"File of JSON lines; - or absent reads stdin."`
}

// Run checks every non-empty line with the service's decoder and publishes
// it as one record; lines that are not valid records are reported with
// their line number and, unless --publish-invalid, left out (exit 1).
func (c *produceCmd) Run(a *app) error {
	if c.Timeout <= 0 {
		return usageError{fmt.Sprintf("--timeout %s: must be positive", c.Timeout)}
	}
	dec, err := record.NewDecoder(record.Config{RecordBytesMax: c.RecordBytesMax})
	if err != nil {
		return usageError{fmt.Sprintf("--record-bytes-max: %v", err)}
	}
	in := io.Reader(os.Stdin)
	name := "stdin"
	if c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			// The *PathError already reads "open FILE: ...".
			return usageError{fmt.Sprintf("%v (give a file of JSON lines, or - to read stdin)", err)}
		}
		defer func() { _ = f.Close() }() // opened only to read
		in, name = f, c.File
	}
	// franz-go refuses a delivery timeout under 1s; the wait for a broker
	// below holds to --timeout itself.
	cl, err := c.kafkaSecurityFlags.producer(a, c.Brokers, kgo.RecordDeliveryTimeout(max(c.Timeout, time.Second)))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := awaitBroker(a.ctx, cl, c.Brokers, c.Timeout, "--timeout "); err != nil {
		return err
	}
	n, err := produceLines(a.ctx, cl, c.Topic, in, produceOptions{LineBytesMax: c.LineBytesMax, Timeout: c.Timeout,
		Decoder: dec, PublishInvalid: c.PublishInvalid, Warn: a.stderr})
	fmt.Fprintf(a.stdout, "published %d records from %s to %s (%d without a tenant_id/subject key), %d failed, %d not valid records %s\n",
		n.published.Load(), name, c.Topic, n.unkeyed.Load(), n.failed.Load(), len(n.invalid), map[bool]string{true: "(published anyway)", false: "(left out)"}[c.PublishInvalid])
	if err != nil {
		return err
	}
	if len(n.tooLarge) > 0 {
		// What the broker refused as too large will be refused again
		// whatever --brokers or --timeout say: name its limit.
		limit := topicLimit(a.ctx, cl, c.Topic)
		lines := "line "
		if len(n.tooLarge) > 1 {
			lines = "lines "
		}
		err := fmt.Errorf("%d records too large for topic %s (%s, the largest %d bytes): the broker refused them (%w); its limit is the topic's max.message.bytes%s: raise it (and the broker's message.max.bytes), or send smaller records",
			len(n.tooLarge), c.Topic, lines+lineList(n.tooLarge), n.largestBytes, n.tooLargeErr, limit)
		if n.lastErr != nil {
			err = fmt.Errorf("%w; %d more failed (last error: %w): check --brokers, that topic %s exists, or raise --timeout %s",
				err, n.failed.Load()-int64(len(n.tooLarge)), n.lastErr, c.Topic, c.Timeout)
		}
		return err
	}
	if n.failed.Load() > 0 {
		return fmt.Errorf("%d records failed to publish to %s at %s (last error: %w); check --brokers, that topic %s exists, or raise --timeout %s",
			n.failed.Load(), c.Topic, strings.Join(c.Brokers, ","), n.lastErr, c.Topic, c.Timeout)
	}
	if len(n.invalid) > 0 && !c.PublishInvalid {
		return fmt.Errorf("%d lines are not valid records and were not published (lines %s, reasons above): fix them, or pass --publish-invalid to send them to the service's dead-letter path",
			len(n.invalid), lineList(n.invalid))
	}
	return nil
}

// awaitBroker waits until a seed broker answers, for at most timeout, so
// an unreachable cluster fails once, by name, instead of retrying for as
// long as there are records to send.
func awaitBroker(ctx context.Context, cl *kgo.Client, brokers []string, timeout time.Duration, timeoutFlag string) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := cl.Ping(wctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("kafka: no broker answered at %s within %s%s (last error: %w): start the broker or fix --brokers",
				strings.Join(brokers, ","), timeoutFlag, timeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lineList prints line numbers for a message: the first ten, then how many more.
func lineList(lines []int) string {
	const shownMax = 10
	var b strings.Builder
	for i, l := range lines {
		if i == shownMax {
			fmt.Fprintf(&b, " and %d more", len(lines)-shownMax)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l))
	}
	return b.String()
}

// produceOptions say how produceLines treats the lines it reads.
type produceOptions struct {
	LineBytesMax int
	// Timeout bounds the wait for the last acknowledgements. 0 = 30s.
	Timeout time.Duration
	// Decoder checks each line as the service will; nil publishes every
	// line unchecked.
	Decoder *record.Decoder
	// PublishInvalid publishes lines the Decoder refuses, after reporting
	// them; otherwise they are reported and left out.
	PublishInvalid bool
	// Warn gets one line per line the Decoder refuses.
	Warn io.Writer
	// Acked, when set, is called once per published line (1-based) with
	// its record (partition and offset set) or its error.
	Acked func(line int, r *kgo.Record, err error)
}

// produceCounts counts what produceLines did.
type produceCounts struct {
	published, failed, unkeyed atomic.Int64
	invalid                    []int // line numbers the Decoder refused
	lastErr                    error
	// tooLarge are the lines the broker refused as larger than it takes
	// (MESSAGE_TOO_LARGE: the topic's max.message.bytes), the largest of
	// them largestBytes as produced (key, value and headers).
	tooLarge     []int
	largestBytes int
	tooLargeErr  error
}

// produceLines publishes each non-empty line of in to topic and waits until
// every record is acknowledged or failed.
func produceLines(ctx context.Context, cl *kgo.Client, topic string, in io.Reader, o produceOptions) (*produceCounts, error) {
	n := &produceCounts{}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	// The outlet's policy for the lines: one attempt each (the client's
	// own retries within the timeout); what the broker does not take is
	// counted failed, and the error is the operator's.
	out := outlet.New(cl, outlet.Config{Attempts: 1, AttemptTimeout: o.Timeout})
	var (
		chunk      []*kgo.Record
		lines      []int
		unanswered error // an attempt the brokers did not answer within the timeout
	)
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		s, _ := out.Produce(ctx, chunk...) // each line's outcome is read here
		for i, at := range lines {
			err := s.Outcome(i)
			if o.Acked != nil {
				o.Acked(at, s.Record(i), err)
			}
			if err == nil {
				n.published.Add(1)
				continue
			}
			n.failed.Add(1)
			if reason := outlet.RefusedForGood(err); reason == tooLargeReason || reason == listTooLargeReason {
				n.tooLarge = append(n.tooLarge, at)
				n.largestBytes = max(n.largestBytes, recordBytes(chunk[i]))
				n.tooLargeErr = err
				continue
			}
			n.lastErr = err
			if errors.Is(err, outlet.ErrUnanswered) {
				unanswered = err
			}
		}
		chunk, lines = nil, nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), o.LineBytesMax)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		value := append([]byte(nil), b...)
		if o.Decoder != nil {
			rec, err := o.Decoder.Decode(value, nil)
			if err == nil && o.Warn != nil {
				for _, w := range notNFC(rec) {
					fmt.Fprintf(o.Warn, "line %d: warning: %s; published as is: ids are compared byte for byte, so it is another "+
						"identity than the same text in NFC (write ids in NFC, as most systems do)\n", line, w)
				}
			}
			if err != nil {
				n.invalid = append(n.invalid, line)
				reason := "invalid"
				var de *record.DecodeError
				if errors.As(err, &de) {
					reason = de.Reason
				}
				action := "left out"
				if o.PublishInvalid {
					action = "published anyway: the service will dead-letter it"
				}
				if o.Warn != nil {
					fmt.Fprintf(o.Warn, "line %d: not a valid record (%s: %v); %s\n", line, reason, err, action)
				}
				if !o.PublishInvalid {
					continue
				}
			}
		}
		key := recordKey(value)
		if key == nil {
			n.unkeyed.Add(1)
		}
		chunk, lines = append(chunk, &kgo.Record{Topic: topic, Key: key, Value: value}), append(lines, line)
		if len(chunk) == produceChunkRecords {
			flush()
		}
	}
	flush()
	if unanswered != nil {
		return n, fmt.Errorf("the brokers did not acknowledge every record within %s: %w", o.Timeout, unanswered)
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("line %d: %w (raise --line-bytes-max for longer lines)", line+1, err)
	}
	return n, nil
}

// The broker's refusals of a record, or a batch, over its size limit, as
// outlet.RefusedForGood names them.
var (
	tooLargeReason     = outlet.RefusedForGood(kerr.MessageTooLarge)
	listTooLargeReason = outlet.RefusedForGood(kerr.RecordListTooLarge)
)

// recordBytes is a record's size as produced: key, value and headers.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// topicLimit reads topic's max.message.bytes for a message (" = N bytes"),
// or says nothing when the broker does not answer within a few seconds:
// the refusal has been reported either way.
func topicLimit(ctx context.Context, cl *kgo.Client, topic string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return ""
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return ""
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			return " = " + *c.Value + " bytes"
		}
	}
	return ""
}

// produceChunkRecords is how many lines produceLines hands to the outlet
// before it waits for their answers.
const produceChunkRecords = 1000

// notNFC says which of r's identifiers are not in Unicode Normalization
// Form C. settle compares ids as opaque bytes (docs/CONTRACT.md): "é" as
// one code point and as "e" with a combining accent are two records, two
// charges. It does not normalise (that would merge ids a producer keeps
// apart); it warns, since the same text spelled two ways is usually a
// mistake upstream.
func notNFC(r record.Record) []string {
	var out []string
	for _, f := range []struct{ name, v string }{{"tenant_id", r.TenantID}, {"record_id", r.RecordID}, {"subject", r.Subject},
		{"corrects", r.Corrects}, {"hold_id", r.HoldID}} {
		if !norm.NFC.IsNormalString(f.v) {
			out = append(out, fmt.Sprintf("%s %+q is not in Unicode NFC (its NFC form is %+q)", f.name, f.v, norm.NFC.String(f.v)))
		}
	}
	return out
}

// recordKey is the key producers give a usage record: tenant_id/subject
// (tenantid/subject for a structured CloudEvent). Only those two fields are
// read; a line without them (or not JSON) gets no key, and the service
// dead-letters what is not a valid record.
func recordKey(value []byte) []byte {
	var r struct {
		TenantID string `json:"tenant_id"`
		CETenant string `json:"tenantid"`
		Subject  string `json:"subject"`
	}
	if json.Unmarshal(value, &r) != nil {
		return nil
	}
	tenant := r.TenantID
	if tenant == "" {
		tenant = r.CETenant
	}
	if tenant == "" || r.Subject == "" {
		return nil
	}
	return []byte(tenant + "/" + r.Subject)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
