package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/canary"
)

// canaryCmd runs the canary from outside the service: a Kafka client
// that sends the canary tenant's records and reads what became of them.
type canaryCmd struct {
	kafkaFlags `embed:""`
	topicFlags `embed:""`

	Every      time.Duration `name:"every" help:"Run on this interval until stopped (each run printed); 0 = once, exit 3 if a scenario failed."`
	Deadline   time.Duration `name:"deadline" default:"2m" help:"Longest a run waits for its outcomes."`
	RetryDelay time.Duration `name:"retry-delay" hidden:"" default:"5s" help:"How long after the first copy the producer's retry is sent."`
	JSON       bool          `name:"json" help:"Print each run as JSON."`
}

// Run runs the canary once, or on an interval.
func (c *canaryCmd) Run(a *app) error {
	if c.Every < 0 || (c.Every > 0 && c.Every < c.Deadline) {
		return usageError{fmt.Sprintf("--every %s: 0 (once) or at least --deadline (%s), so runs never overlap", c.Every, c.Deadline)}
	}
	kopts, err := c.kafkaSecurityFlags.clientOpts()
	if err != nil {
		return err
	}
	cn, err := canary.New(canary.Config{Brokers: c.Brokers, ClientOpts: kopts, UsageTopic: c.Topic, ResultsTopic: c.ResultsTopic,
		SettlementsTopic: c.SettlementsTopic, Deadline: c.Deadline, RetryDelay: c.RetryDelay, Logger: a.log})
	if err != nil {
		return usageError{err.Error()}
	}
	for {
		rep, err := cn.Run(a.ctx)
		switch {
		case stopped(a):
			return nil // SIGINT or SIGTERM: a stop asked for
		case err != nil:
			if c.Every == 0 {
				return err
			}
			a.log.Error("canary run failed", "err", err)
		default:
			if err := c.print(a, rep); err != nil {
				return err
			}
			if !rep.Passed && c.Every == 0 {
				return exitError{code: exitMismatch, err: errors.New("canary failed: " + strings.Join(rep.Failed(), ", "))}
			}
		}
		if c.Every == 0 {
			return nil
		}
		select {
		case <-a.ctx.Done():
			return nil
		case <-time.After(c.Every):
		}
	}
}

func (c *canaryCmd) print(a *app, rep *canary.Report) error {
	if c.JSON {
		return printJSON(a, rep)
	}
	fmt.Fprintf(a.stdout, "canary run %s (tenant %s, period %s)\n", rep.Run, canary.Tenant, rep.Period)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tSECONDS\tPROBLEM")
	for _, o := range rep.Outcomes {
		res := "ok"
		if !o.OK {
			res = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\n", o.Scenario, res, o.Seconds, o.Problem)
	}
	fmt.Fprintf(tw, "crash_before_ack\tnot run\t\t%s\n", rep.CrashNote)
	return tw.Flush()
}

// stopped says whether the process was asked to stop.
func stopped(a *app) bool {
	select {
	case <-a.ctx.Done():
		return true
	default:
		return false
	}
}
