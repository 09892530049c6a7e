package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/settle"
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
	// No default: without a database the case stays open, and says so.
	DatabaseURL string `name:"database-url" env:"SETTLE_DATABASE_URL,DATABASE_URL" help:"PostgreSQL URL of a login that resolves cases: the conflict case each run opens is rejected as the canary; without it the case is left open."`
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
	cfg := canary.Config{Brokers: c.Brokers, ClientOpts: kopts, UsageTopic: c.Topic, ResultsTopic: c.ResultsTopic,
		SettlementsTopic: c.SettlementsTopic, Deadline: c.Deadline, RetryDelay: c.RetryDelay, Logger: a.log}
	if c.DatabaseURL != "" {
		resolve, closeDB, err := c.resolver(a)
		if err != nil {
			return err
		}
		defer closeDB()
		cfg.ResolveCase = resolve
	}
	cn, err := canary.New(cfg)
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

// resolver opens the database and returns how a run's conflict case is
// rejected: the analysts' path (settle conflicts resolve --reject), by a
// login that may resolve, recorded as the canary (the login, "(as
// settle-canary)"), with the reason the service's canary gives.
func (c *canaryCmd) resolver(a *app) (func(context.Context, int64) error, func(), error) {
	f := storeFlags{databaseFlags: databaseFlags{DatabaseURL: c.DatabaseURL, PoolMaxConns: 2}, topicFlags: c.topicFlags}
	store, closeDB, err := f.openStore(a)
	if err != nil {
		return nil, nil, err
	}
	who, err := whoIs(a.ctx, store.Pool())
	if err == nil {
		err = who.mayResolve()
	}
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	by := who.author(canary.Tenant)
	return func(ctx context.Context, id int64) error {
		_, err := store.Resolve(ctx, settle.ResolveRequest{CaseID: id, Decision: "reject", Reason: canary.CaseReason, By: by})
		return err
	}, closeDB, nil
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
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, cs := range rep.Cases {
		switch {
		case cs.Resolved:
			fmt.Fprintf(a.stdout, "conflict case %d rejected as %s\n", cs.ID, canary.Tenant)
		case cs.Error != "":
			fmt.Fprintf(a.stdout, "conflict case %d left open: %s\n", cs.ID, cs.Error)
		default:
			fmt.Fprintf(a.stdout, "conflict case %d left open: no --database-url (settle conflicts resolve %d --reject --reason %q)\n", cs.ID, cs.ID, canary.CaseReason)
		}
	}
	return nil
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
