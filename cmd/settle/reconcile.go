package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/record"
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
		dec, err := record.NewDecoder(record.Config{RecordBytesMax: c.RecordBytes})
		if err != nil {
			return usageError{err.Error()}
		}
		ctx, cancel := context.WithTimeout(a.ctx, c.ReadTimeout)
		defer cancel()
		err = reconcile.ReadTopics(ctx, reconcile.TopicsToRead{Brokers: c.Brokers, Opts: append([]kgo.Opt{kafkaLogger(a)}, kopts...),
			Group: c.Group, TenantID: c.Tenant, Period: c.Period, UsageTopic: c.Topic, SettlementsTopic: c.SettlementsTopic, Decoder: dec}, &in)
		if errors.Is(err, reconcile.ErrBrokers) {
			return usageError{fmt.Sprintf("--brokers: %v", err)}
		}
		if err != nil {
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
			n = "not checked: " + c.Skipped
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
