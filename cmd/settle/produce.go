package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceCmd publishes JSON lines to a topic, keyed like producers key
// usage records, so that one account's records share a partition.
type produceCmd struct {
	kafkaFlags `embed:""`

	Topic        string `name:"topic" env:"SETTLE_PRODUCE_TOPIC" default:"usage" help:"Topic to publish to."`
	LineBytesMax int    `name:"line-bytes-max" env:"SETTLE_LINE_BYTES_MAX" default:"1048576" help:"Longest line accepted, in bytes."`
	File         string `arg:"" optional:"" default:"-" help:"File of JSON lines; - or absent reads stdin."`
}

// Run publishes every non-empty line as one record.
func (c *produceCmd) Run(a *app) error {
	in := io.Reader(os.Stdin)
	name := "stdin"
	if c.File != "-" {
		f, err := os.Open(c.File)
		if err != nil {
			return usageError{fmt.Sprintf("open %s: %v", c.File, err)}
		}
		defer f.Close()
		in, name = f, c.File
	}
	cl, err := c.kafkaSecurityFlags.producer(a, c.Brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	n, err := produceLines(a.ctx, cl, c.Topic, in, c.LineBytesMax)
	fmt.Fprintf(a.stdout, "published %d records from %s to %s (%d without a tenant_id/subject key), %d failed\n",
		n.published.Load(), name, c.Topic, n.unkeyed.Load(), n.failed.Load())
	if err != nil {
		return err
	}
	if n.failed.Load() > 0 {
		return fmt.Errorf("%d records failed to publish (last error: %v); check --brokers and that topic %s exists", n.failed.Load(), n.lastErr, c.Topic)
	}
	return nil
}

// produceCounts counts what produceLines did.
type produceCounts struct {
	published, failed, unkeyed atomic.Int64
	mu                         sync.Mutex
	lastErr                    error
}

// produceLines publishes each non-empty line of in to topic and waits until
// every record is acknowledged or failed.
func produceLines(ctx context.Context, cl *kgo.Client, topic string, in io.Reader, lineBytesMax int) (*produceCounts, error) {
	n := &produceCounts{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), lineBytesMax)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		value := append([]byte(nil), b...)
		key := recordKey(value)
		if key == nil {
			n.unkeyed.Add(1)
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				n.failed.Add(1)
				n.mu.Lock()
				n.lastErr = err
				n.mu.Unlock()
				return
			}
			n.published.Add(1)
		})
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return n, fmt.Errorf("flush: %w", err)
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("line %d: %w (raise --line-bytes-max for longer lines)", line+1, err)
	}
	return n, nil
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
