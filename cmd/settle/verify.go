package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/settle/verify"
)

// verifyCmd checks the settlements topic alone (no database), as finance
// reads it.
type verifyCmd struct {
	kafkaSecurityFlags `embed:""`

	Brokers          []string      `name:"brokers" required:"" env:"SETTLE_KAFKA_BROKERS,KAFKA_BROKERS" sep:"," help:"Kafka seed brokers."`
	SettlementsTopic string        `name:"settlements-topic" env:"SETTLE_SETTLEMENTS_TOPIC" default:"settlements" help:"The settlements topic."`
	Tenant           string        `name:"tenant" help:"Check one tenant's accounts (default: every tenant)."`
	Period           string        `name:"period" help:"First period (YYYY-MM) whose settlements are totalled (default: all); chains are checked across every period."`
	To               string        `name:"to" help:"Last period (YYYY-MM) totalled; default --period."`
	FromHeads        string        `name:"from-heads" placeholder:"FILE" type:"path" help:"Start from the heads an earlier run archived (--heads-out): its offsets and every account's last hash."`
	HeadsOut         string        `name:"heads-out" placeholder:"FILE" help:"Write the heads at the end of the range here, for the next run's --from-heads (written only when nothing was found)."`
	IncludeCanary    bool          `name:"include-canary" hidden:"" help:"Total the canary tenant's settlements too (its chains are checked either way)."`
	JSON             bool          `name:"json" help:"Print the report as JSON."`
	Window           int           `name:"window" hidden:"" default:"100000" help:"Most recent settlements kept to compare a repeated settlement_id with."`
	ReadTimeout      time.Duration `name:"read-timeout" hidden:"" default:"30m" help:"Longest time spent reading the topic."`
}

// Run verifies and exits 3 when anything is found.
func (c *verifyCmd) Run(a *app) error {
	cfg := verify.Config{Brokers: c.Brokers, Topic: c.SettlementsTopic, Tenant: c.Tenant, From: c.Period, To: c.To, WindowMax: c.Window, IncludeCanary: c.IncludeCanary}
	for _, p := range []struct{ flag, v string }{{"--period", c.Period}, {"--to", c.To}} {
		if p.v != "" {
			if err := checkPeriod(p.flag, p.v); err != nil {
				return err
			}
		}
	}
	if c.To == "" {
		cfg.To = c.Period
	} else if c.Period == "" {
		return usageError{"--to needs --period"}
	}
	if c.FromHeads != "" {
		b, err := os.ReadFile(c.FromHeads)
		if err != nil {
			return usageError{fmt.Sprintf("--from-heads: %v", err)}
		}
		cfg.Heads = &verify.Heads{}
		if err := json.Unmarshal(b, cfg.Heads); err != nil {
			return usageError{fmt.Sprintf("--from-heads %s: not a heads file written by --heads-out: %v", c.FromHeads, err)}
		}
	}
	var err error
	if cfg.ClientOpts, err = c.kafkaSecurityFlags.clientOpts(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	cfg.Progress = func(p verify.Progress) {
		fmt.Fprintf(a.stderr, "verify: %d of %d messages read\n", p.Read, p.Total)
	}
	ctx, cancel := context.WithTimeout(a.ctx, c.ReadTimeout)
	defer cancel()
	rep, heads, err := verify.Run(ctx, cfg)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (raise --read-timeout)", err)
	}
	if err != nil {
		return err
	}
	if c.HeadsOut != "" && rep.Clean() {
		b, err := json.MarshalIndent(heads, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.HeadsOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--heads-out: %w", err)
		}
	}
	return emitReport(a, c.JSON, rep, func() error { return printVerify(a, rep) }, rep.Clean(),
		fmt.Errorf("%d findings: the topic does not hold what settle published", len(rep.Findings)))
}

func printVerify(a *app, r *verify.Report) error {
	fmt.Fprintf(a.stdout, "topic %s: %d messages read, %d checked, %d identical repeats, %d accounts\n", r.Topic, r.Messages, r.Checked, r.Repeats, r.Accounts)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPERIOD\tCURRENCY\tSETTLEMENTS\tBALANCE\tHELD")
	for _, t := range r.Totals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Tenant, t.Period, t.Currency, t.Settlements, t.Balance, t.Held)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if r.FromDigest != "" {
		fmt.Fprintf(a.stdout, "from digest %s\n", r.FromDigest)
	}
	fmt.Fprintf(a.stdout, "digest %s\n", r.Digest)
	if r.Clean() {
		fmt.Fprintln(a.stdout, "\nno findings")
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTENANT\tSUBJECT\tCURRENCY\tSEQUENCE\tAT\tDETAIL")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d@%d\t%s\n", f.Kind, f.Tenant, f.Subject, f.Currency, f.Sequence, f.Partition, f.Offset, f.Detail)
	}
	return tw.Flush()
}
