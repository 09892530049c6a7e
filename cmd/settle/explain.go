package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/settle/inspect"
)

// explainCmd prints the whole history of one record_id.
type explainCmd struct {
	readFlags `embed:""`
	Tenant    string `arg:"" help:"Tenant id."`
	Period    string `arg:"" help:"Account period (YYYY-MM)."`
	RecordID  string `arg:"" name:"record-id" help:"record_id (for an accepted case's adjustment: the case id)."`
	JSON      bool   `name:"json" help:"Print JSON (the API's /api/explain/TENANT/PERIOD/RECORD_ID)."`
}

func (c *explainCmd) Run(a *app) error {
	if err := checkPeriod("period", c.Period); err != nil {
		return err
	}
	store, done, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer done()
	e, err := inspect.New(store).Explain(a.ctx, c.Tenant, c.Period, c.RecordID)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, e)
	}
	w := a.stdout
	fmt.Fprintf(w, "%s / %s / %s\n", e.TenantID, e.AccountPeriod, e.RecordID)
	if e.Empty() {
		return fmt.Errorf("settle has seen no operation, waiting operation, case or dead letter of record %s in tenant %s period %s; "+
			"a record whose bytes do not name it is a dead letter kept by its coordinates only: settle dlq list", c.RecordID, c.Tenant, c.Period)
	}
	for _, x := range e.Operations {
		if err := printExplained(w, &x); err != nil {
			return err
		}
	}
	for _, wop := range e.Waiting {
		fmt.Fprintf(w, "\nwaiting %s %s/%s for %s/%s: %s since %s (source %s/%d@%d)", wop.Operation, wop.AccountPeriod, wop.RecordID,
			wop.TargetPeriod, wop.TargetRecordID, wop.Status, rfc(wop.Since), wop.Source.Topic, wop.Source.Partition, wop.Source.Offset)
		if wop.CaseID != 0 {
			fmt.Fprintf(w, ", case %d", wop.CaseID)
		}
		fmt.Fprintln(w)
	}
	for _, cs := range e.Cases {
		fmt.Fprintf(w, "\ncase %d (%s, %s): %s; differing: %s\n", cs.ID, cs.Operation, cs.Reason, cs.Status, strings.Join(cs.Differing, ", "))
	}
	for _, l := range e.Letters {
		if c := l.Correction; c != nil {
			fmt.Fprintf(w, "\ncorrected from dead letter %d (%s) by %s at %s: %s; resent as %s/%d@%d\n", l.ID, l.Reason, c.EditedBy,
				rfc(c.At), c.Reason, c.Delivery.Topic, c.Delivery.Partition, c.Delivery.Offset)
			continue
		}
		fmt.Fprintf(w, "\ndead letter %d (%s) at %s: %s; settle dlq show %d\n", l.ID, l.Reason, rfc(l.At), l.Error, l.ID)
	}
	return nil
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// printExplained prints one operation on the record: its outcome, links,
// outbox rows, deliveries and ledger rows.
func printExplained(w io.Writer, x *inspect.ExplainedIdentity) error {
	fmt.Fprintf(w, "\n%s: %s", x.Operation, x.Outcome)
	if x.Reason != "" {
		fmt.Fprintf(w, " (%s)", x.Reason)
	}
	fmt.Fprintln(w)
	if x.SettlementID != "" {
		fmt.Fprintf(w, "  settlement   %s\n", x.SettlementID)
	}
	if x.Subject != "" {
		fmt.Fprintf(w, "  account      %s %s\n", x.Subject, x.Currency)
	}
	fmt.Fprintf(w, "  seen         %s, committed %s, %d attempt(s)\n", rfc(x.FirstSeenAt), rfc(x.CommittedAt), x.Attempts)
	fmt.Fprintf(w, "  response     %s\n", strings.TrimSpace(string(x.Response)))
	printLinks(w, &x.Links)
	for _, o := range x.Outbox {
		state := "NOT YET PUBLISHED"
		switch {
		case o.Published:
			state = "published"
		case o.Parked:
			state = "PARKED: the broker refused it for good (settle dlq list --parked)"
		}
		fmt.Fprintf(w, "  outbox       %s row %d: %s\n", o.Topic, o.ID, state)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, d := range x.Deliveries {
		fmt.Fprintf(tw, "  delivery\t%s/%d@%d\t%s %s\t%s\n", d.Topic, d.Partition, d.Offset, d.Outcome, d.Reason, rfc(d.At))
	}
	for _, r := range x.Entries {
		fmt.Fprintf(tw, "  ledger row\t%d\t%s %s %s\t%s\n", r.ID, r.Subject, r.Bucket, r.Amount, r.Currency)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the explanation: %w", err)
	}
	return nil
}

// printLinks prints an operation's chain root, target, corrections, chain
// and hold.
func printLinks(w io.Writer, l *inspect.ExplainLinks) {
	if r := l.Root; r != nil {
		fmt.Fprintf(w, "  chain root   %s/%s (%s)\n", r.AccountPeriod, r.RecordID, r.Operation)
	}
	if t := l.Target; t != nil {
		fmt.Fprintf(w, "  target       %s/%s (%s, %s)\n", t.AccountPeriod, t.RecordID, t.Operation, t.Outcome)
	}
	for _, c := range l.Corrections {
		fmt.Fprintf(w, "  correction   %s/%s (%s) %s\n", c.AccountPeriod, c.RecordID, c.Operation, c.SettlementID)
	}
	if ch := l.Chain; ch != nil {
		fmt.Fprintf(w, "  chain        net charge %s, version %d", ch.NetCharge, ch.Version)
		if ch.Refund != nil {
			fmt.Fprintf(w, ", refunded %s by %s", ch.Refunded, ch.Refund.RecordID)
		}
		if ch.Reclaim != nil {
			fmt.Fprintf(w, ", reclaimed by %s", ch.Reclaim.RecordID)
		}
		fmt.Fprintln(w)
	}
	if h := l.Hold; h != nil {
		fmt.Fprintf(w, "  hold         %s, %s left, %s", h.Amount, h.Remaining, h.Status)
		if h.ClosedBy != nil {
			fmt.Fprintf(w, ", closed by %s (%s)", h.ClosedBy.RecordID, h.ClosedBy.Operation)
		}
		fmt.Fprintln(w)
	}
}
