package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/reconcile"
)

// sourceProgressLines is how often (in lines) the progress line is
// written, besides once a second.
const sourceProgressLines = 100_000

// runSource compares a source export with what settle holds and exits 3
// when they disagree.
func (c *reconcileCmd) runSource(a *app) error {
	if c.Tenant == "" || c.Period == "" {
		return usageError{"--source needs --tenant and --period (and --to for a range)"}
	}
	for _, p := range []string{c.Period, c.To} {
		if _, err := time.Parse("2006-01", p); p != "" && err != nil {
			return usageError{fmt.Sprintf("period %q: want YYYY-MM", p)}
		}
	}
	if c.To != "" && c.To < c.Period {
		return usageError{fmt.Sprintf("--to %s is before --period %s", c.To, c.Period)}
	}
	for _, op := range c.Operations {
		if !slices.Contains(record.Kinds, record.Kind(op)) {
			return usageError{fmt.Sprintf("--operations: %q is not a kind (%v)", op, record.Kinds)}
		}
	}
	var in io.Reader = os.Stdin
	if c.Source != "-" {
		f, err := os.Open(c.Source)
		if err != nil {
			return usageError{fmt.Sprintf("--source: %v", err)}
		}
		defer func() { _ = f.Close() }() // opened only to read
		in = f
	}
	dec, err := record.NewDecoder(record.Config{RecordBytesMax: c.RecordBytes})
	if err != nil {
		return usageError{err.Error()}
	}
	src, err := reconcile.NewSourceReader(in, c.SourceFormat, dec, max(c.RecordBytes*2, 1<<20))
	if err != nil {
		return usageError{fmt.Sprintf("--source %s: %v", c.Source, err)}
	}
	store, closeStore, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer closeStore()
	start := time.Now()
	report, err := reconcile.CheckSource(a.ctx, store, reconcile.SourceCheckInput{TenantID: c.Tenant, From: c.Period, To: c.To,
		Operations: c.Operations, ProgressEvery: sourceProgressLines,
		Progress: func(p reconcile.SourceProgress) {
			end := "\r"
			if p.Done {
				end = "\n"
			}
			fmt.Fprintf(a.stderr, "reconcile --source: %d lines, %d in scope, %d identities, %d findings, %s%s",
				p.Lines, p.InScope, p.Identities, p.Findings, time.Since(start).Round(time.Second), end)
		}}, src)
	if err != nil {
		return err
	}
	n := 0
	for _, v := range report.Counts {
		n += v
	}
	return emitReport(a, c.JSON, report, func() error { return printSourceReport(a, report) }, report.Agrees(),
		fmt.Errorf("the source and settle disagree: %d findings", n))
}

func printSourceReport(a *app, r *reconcile.SourceReport) error {
	to := r.To
	fmt.Fprintf(a.stdout, "tenant %s, periods %s to %s: %d lines, %d out of scope, %d repeated\n\n", r.TenantID, r.From, to, r.Lines, r.OutOfScope, r.Duplicates)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PERIOD\tSOURCE IDENTITIES\tMATCHED\tREFUSED\tFINDINGS")
	for _, p := range r.Periods {
		var fs []string
		for k, v := range p.ByClass {
			fs = append(fs, fmt.Sprintf("%s %d", k, v))
		}
		slices.Sort(fs)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", p.Period, p.Identities, p.Matched, p.Refused, strings.Join(fs, ", "))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	fmt.Fprintln(a.stdout)
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PERIOD\tCURRENCY\tSOURCE\tSETTLE\tDIFFERENCE\t")
	for _, t := range r.Totals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", t.Period, t.Currency, t.Source, t.Settle, t.Difference)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if r.Agrees() {
		fmt.Fprintln(a.stdout, "\nthe source and settle agree")
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tPERIOD\tRECORD\tOPERATION\tLINE\tSEEN\tREASON\tDETAIL")
	for _, f := range r.Findings {
		detail := f.Detail
		for _, d := range f.Diff {
			detail += fmt.Sprintf("; %s: settle %q, source %q", d.Field, d.Settle, d.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", f.Class, f.Period, f.RecordID, f.Operation, f.Line, f.Seen, f.Reason, detail)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if r.Truncated {
		fmt.Fprintf(a.stdout, "(only the first %d findings are listed; counts: %v)\n", reconcile.SourceFindingsMax, r.Counts)
	}
	return nil
}
