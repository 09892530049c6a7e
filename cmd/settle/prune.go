package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/settle/retention"
)

// pruneCmd removes operational history (retention.Store.Prune); identities,
// ledger rows and cases are never removed.
type pruneCmd struct {
	storeFlags       `embed:""`
	DryRun           bool          `name:"dry-run" help:"Print what would be removed, per table; remove nothing."`
	DeadLettersAfter time.Duration `name:"dead-letters-after" help:"Also remove dead letters older than this, e.g. 720h (0 = keep them)."`
	CanaryKeep       time.Duration `name:"canary-keep" help:"Also remove the canary tenant's accounts with nothing newer than this, at least 48h, e.g. 1080h (0 = keep them)."`
	JSON             bool          `name:"json" help:"Print the counts as JSON."`
}

// Run prunes, or counts with --dry-run, and prints the rows per table.
func (c *pruneCmd) Run(a *app) error {
	if c.DeadLettersAfter < 0 {
		return usageError{fmt.Sprintf("--dead-letters-after %s: must be positive (0 = keep dead letters)", c.DeadLettersAfter)}
	}
	if c.CanaryKeep < 0 || (c.CanaryKeep > 0 && c.CanaryKeep < retention.CanaryKeepFloor) {
		return usageError{fmt.Sprintf("--canary-keep %s: at least %s (the canary writes one account a day), or 0 to keep its history", c.CanaryKeep, retention.CanaryKeepFloor)}
	}
	store, closeDB, err := c.openStore(a)
	if err != nil {
		return err
	}
	defer closeDB()
	if !c.DryRun {
		who, err := whoIs(a.ctx, store.Pool())
		if err != nil {
			return err
		}
		if err := who.mayOperate("pruning"); err != nil {
			return err
		}
	}
	opts := retention.Options{DryRun: c.DryRun}
	if c.DeadLettersAfter > 0 {
		opts.DeadLettersBefore = time.Now().Add(-c.DeadLettersAfter)
	}
	if c.CanaryKeep > 0 {
		opts.CanaryBefore = time.Now().Add(-c.CanaryKeep)
	}
	counts, err := retention.New(store).Prune(a.ctx, opts)
	if err != nil {
		return err
	}
	if c.JSON {
		tables := map[string]int64{}
		for _, pc := range counts {
			tables[pc.Table] = pc.Rows
		}
		return printJSON(a, map[string]any{"dry_run": c.DryRun, "tables": tables})
	}
	verb := "removed"
	if c.DryRun {
		verb = "would remove"
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "table\trows %s\t\n", verb)
	for _, pc := range counts {
		fmt.Fprintf(tw, "%s\t%d\t\n", pc.Table, pc.Rows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.DeadLettersAfter == 0 {
		fmt.Fprintln(a.stdout, "dead letters kept (--dead-letters-after 0)")
	}
	if c.CanaryKeep == 0 {
		fmt.Fprintln(a.stdout, "identities, ledger rows and cases are kept; the canary tenant's too (--canary-keep 0)")
	} else {
		fmt.Fprintln(a.stdout, "identities, ledger rows and cases of every tenant but the canary are kept")
	}
	return nil
}
