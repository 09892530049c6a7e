package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
)

// reconcileCmd checks the database's invariants and compares the topics
// with what was settled.
type reconcileCmd struct {
	storeFlags         `embed:""`
	kafkaSecurityFlags `embed:""`

	Brokers     []string      `name:"brokers" env:"SETTLE_KAFKA_BROKERS,KAFKA_BROKERS" sep:"," help:"Kafka seed brokers; with them, reconcile compares the group's Kafka offsets and reads the usage and settlements topics; without, it checks the database alone."`
	Group       string        `name:"group" env:"SETTLE_GROUP" default:"settle" help:"Consumer group whose offsets are compared."`
	Tenant      string        `name:"tenant" help:"Tenant to check; with --period, compares the topics with the settled identities for it."`
	Period      string        `name:"period" help:"Account period (YYYY-MM) to compare; needs --tenant."`
	OutboxGrace time.Duration `name:"outbox-grace" hidden:"" default:"5m" help:"How old an unpublished outbox row must be to count as a discrepancy."`
	ReadTimeout time.Duration `name:"read-timeout" hidden:"" default:"2m" help:"Longest time spent reading the topics."`
	RecordBytes int           `name:"record-bytes-max" hidden:"" env:"SETTLE_RECORD_BYTES_MAX" default:"65536" help:"Largest record value the service accepts; larger ones are dead letters, not identities."`
	JSON        bool          `name:"json" help:"Print the report as JSON."`

	Source       string   `name:"source" placeholder:"FILE|-" help:"Compare the source system's own export of its final records (a file, or - for stdin) with what settle holds, for --tenant and --period (to --to); checks nothing else."`
	SourceFormat string   `name:"source-format" default:"auto" enum:"auto,jsonl,csv,cloudevents" help:"Format of --source: jsonl (JSON lines in the input grammar), csv (a header naming the record's fields), cloudevents (structured, one per line or a JSON array), auto (by its first byte)."`
	To           string   `name:"to" help:"Last period (YYYY-MM) of the range --source covers; default --period."`
	Operations   []string `name:"operations" sep:"," help:"Kinds the source export holds (default: every kind); settled identities of other kinds are not reported as extra."`
}

// Run reconciles and exits 3 when anything is found.
func (c *reconcileCmd) Run(a *app) error {
	if (c.Tenant == "") != (c.Period == "") && c.Period != "" {
		return usageError{"--period needs --tenant"}
	}
	if c.Period != "" {
		if err := checkPeriod("--period", c.Period); err != nil {
			return err
		}
	}
	if c.Source != "" {
		return c.runSource(a)
	}
	if c.To != "" || len(c.Operations) > 0 {
		return usageError{"--to and --operations go with --source"}
	}
	kopts, err := c.kafkaSecurityFlags.clientOpts()
	if err != nil {
		return err
	}
	store, closeStore, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer closeStore()
	in := reconcile.Input{TenantID: c.Tenant, Period: c.Period, OutboxGrace: c.OutboxGrace,
		Group: c.Group, SourceTopic: c.Topic}
	if len(c.Brokers) > 0 {
		if err := c.readKafka(a, kopts, &in); err != nil {
			return err
		}
	}
	report, err := reconcile.Run(a.ctx, store, in)
	if err != nil {
		return err
	}
	return emitReport(a, c.JSON, report, func() error { return printReport(a, report) }, report.Clean(),
		fmt.Errorf("%d discrepancies found", len(report.Findings)))
}

// emitReport prints a check's report, as JSON or as text, and ends with
// the mismatch exit code (3) and mismatch when the check is not clean.
func emitReport(a *app, asJSON bool, report any, text func() error, clean bool, mismatch error) error {
	out := text
	if asJSON {
		out = func() error { return printJSON(a, report) }
	}
	if err := out(); err != nil {
		return err
	}
	if !clean {
		return exitError{code: exitMismatch, err: mismatch}
	}
	return nil
}

func printReport(a *app, r *reconcile.Report) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tFINDINGS")
	for _, c := range r.Checks {
		n := fmt.Sprint(c.Findings)
		if c.Skipped != "" {
			n = "skipped: " + c.Skipped
		}
		fmt.Fprintf(tw, "%s\t%s\n", c.Name, n)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if r.Clean() {
		fmt.Fprintln(a.stdout, "\nno discrepancies")
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tTENANT\tPERIOD\tRECORD\tOPERATION\tSETTLEMENT\tDETAIL")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Class, f.TenantID, f.Period, f.RecordID, f.Operation, f.SettlementID, f.Detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

// readKafka fills in the group's Kafka offsets and, for a tenant and
// period, the usage and settlements topics' records of it.
func (c *reconcileCmd) readKafka(a *app, kopts []kgo.Opt, in *reconcile.Input) error {
	ctx, cancel := context.WithTimeout(a.ctx, c.ReadTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), kafkaLogger(a)}, kopts...)...)
	if err != nil {
		return usageError{fmt.Sprintf("--brokers: %v", err)}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, c.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetch the offsets of group %s from %v: %w", c.Group, c.Brokers, err)
	}
	in.KafkaOffsets = map[string]map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			if in.KafkaOffsets[o.Topic] == nil {
				in.KafkaOffsets[o.Topic] = map[int32]int64{}
			}
			in.KafkaOffsets[o.Topic][o.Partition] = o.At
		}
	})
	if c.Tenant == "" || c.Period == "" {
		return nil
	}
	dec, err := record.NewDecoder(record.Config{RecordBytesMax: c.RecordBytes})
	if err != nil {
		return usageError{err.Error()}
	}
	starts, err := readTopic(ctx, adm, c.Brokers, kopts, c.Topic, func(r *kgo.Record) {
		rec, err := dec.Decode(r.Value, kafkahdr.FromKafka(r.Headers))
		if err != nil || rec.TenantID != c.Tenant || rec.AccountPeriod != c.Period {
			return // a dead letter, or another tenant's or period's
		}
		in.Source = append(in.Source, reconcile.SourceRecord{Source: message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			RecordID: rec.RecordID, Operation: string(rec.Kind)})
	})
	if err != nil {
		return err
	}
	in.SourceRead, in.SourceStart = true, starts
	_, err = readTopic(ctx, adm, c.Brokers, kopts, c.SettlementsTopic, func(r *kgo.Record) {
		var resp message.Response
		if json.Unmarshal(r.Value, &resp) != nil || resp.Identity.TenantID != c.Tenant || resp.Identity.AccountPeriod != c.Period {
			return
		}
		header := ""
		for _, h := range r.Headers {
			if h.Key == "settlement_id" {
				header = string(h.Value)
			}
		}
		in.Published = append(in.Published, reconcile.PublishedSettlement{SettlementID: resp.SettlementID,
			RecordID: resp.Identity.RecordID, Operation: resp.Identity.Operation,
			Source:             message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			HeaderSettlementID: header, Sequence: resp.Sequence})
	})
	if err != nil {
		return err
	}
	in.PublishedRead = true
	return nil
}

// readTopic reads topic from its start to the end offsets listed when it
// begins, calling fn for every record, and returns each partition's start
// offset (records before it left by retention).
func readTopic(ctx context.Context, adm *kadm.Client, brokers []string, kopts []kgo.Opt, topic string, fn func(*kgo.Record)) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	startsL, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	starts := map[int32]int64{}
	consume := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			listErr = fmt.Errorf("end offset of %s/%d: %w", topic, o.Partition, o.Err)
			return
		}
		s, _ := startsL.Lookup(topic, o.Partition)
		starts[o.Partition] = s.Offset
		if o.Offset > s.Offset {
			consume[o.Partition] = kgo.NewOffset().At(s.Offset)
			remaining[o.Partition] = o.Offset
		}
	})
	if listErr != nil {
		return nil, listErr
	}
	if len(ends) == 0 {
		return nil, fmt.Errorf("topic %s: not found (check --topic / --settlements-topic)", topic)
	}
	if len(consume) == 0 {
		return starts, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})}, kopts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s: %w (raise --read-timeout)", topic, ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("read %s/%d: %w", topic, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			fn(r)
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return starts, nil
}
