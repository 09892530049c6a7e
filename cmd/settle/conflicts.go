package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
)

// conflictsCmd is the analysts' command line over conflict cases; the same
// data as the analyst page and its JSON API.
type conflictsCmd struct {
	List    conflictsListCmd    `cmd:"" help:"List cases, newest first, a page at a time."`
	Show    conflictsShowCmd    `cmd:"" help:"One case: payloads, deliveries, resolution."`
	Diff    conflictsDiffCmd    `cmd:"" help:"One case's fields side by side, differences marked."`
	Resolve conflictsResolveCmd `cmd:"" help:"Accept a case as a linked adjustment, or reject it."`
	Export  conflictsExportCmd  `cmd:"" help:"Export the matching cases as CSV or JSON."`
}

// caseFilterFlags select cases, like the queue page's filter form.
type caseFilterFlags struct {
	Tenant    string `name:"tenant" help:"Only this tenant."`
	Period    string `name:"period" help:"Only this account period (YYYY-MM)."`
	Reason    string `name:"reason" help:"Only this reason: fingerprint_mismatch, orphan, invalid_link, target_refunded, version_conflict."`
	Status    string `name:"status" default:"open" help:"Only this status: open, accepted, rejected, auto_resolved, or all."`
	OlderThan string `name:"older-than" help:"Only cases opened longer ago than this (90m, 2h, 7d)."`
	NewerThan string `name:"newer-than" help:"Only cases opened more recently than this (90m, 2h, 7d)."`
}

// noneMatch says that no case matches, and what the filters selected:
// the status first, since a list shows open cases unless told otherwise.
func (f caseFilterFlags) noneMatch() string {
	status := f.Status + " cases"
	if f.Status == "all" {
		status = "cases"
	}
	var by []string
	for _, x := range []struct{ name, v string }{{"tenant", f.Tenant}, {"period", f.Period}, {"reason", f.Reason},
		{"opened more than", f.OlderThan}, {"opened less than", f.NewerThan}} {
		if x.v != "" {
			if strings.HasPrefix(x.name, "opened") {
				x.v += " ago"
			}
			by = append(by, x.name+" "+x.v)
		}
	}
	msg := "no " + status + " match"
	if len(by) > 0 {
		msg += " (" + strings.Join(by, ", ") + ")"
	}
	if f.Status != "all" {
		msg += "; --status all lists every case"
	}
	return msg
}

func (f caseFilterFlags) filter(now time.Time) (inspect.CaseFilter, error) {
	cf, err := analyst.Filter{Tenant: f.Tenant, Period: f.Period, Reason: f.Reason, Status: f.Status,
		OlderThan: f.OlderThan, NewerThan: f.NewerThan}.CaseFilter(now, "--older-than", "--newer-than")
	if err == nil {
		err = cf.Validate()
	}
	return cf, usageIfBad(err)
}

// usageIfBad turns a store's ErrBadFilter into a usage error (exit 2).
func usageIfBad(err error) error {
	if errors.Is(err, inspect.ErrBadFilter) {
		return usageError{err.Error()}
	}
	return err
}

type conflictsListCmd struct {
	readFlags       `embed:""`
	caseFilterFlags `embed:""`
	Limit           int    `name:"limit" default:"50" help:"Cases per page (at most 1000)."`
	After           string `name:"after" help:"Cursor of the next page, as printed by the previous one."`
	JSON            bool   `name:"json" help:"Print JSON (the API's /api/cases)."`
}

func (c *conflictsListCmd) Run(a *app) error {
	f, err := c.filter(time.Now())
	if err != nil {
		return err
	}
	f.Limit, f.After = c.Limit, c.After
	if err := f.Validate(); err != nil {
		return usageError{err.Error()}
	}
	store, done, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer done()
	page, err := inspect.New(store).ListCases(a.ctx, f)
	if err != nil {
		return usageIfBad(err)
	}
	if c.JSON {
		return printJSON(a, page)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tOPENED\tTENANT\tPERIOD\tRECORD\tOPERATION\tREASON\tSTATUS\tSUBJECT\tSTORED\tINCOMING\tDIFFERS")
	for _, cs := range page.Cases {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cs.ID, cs.OpenedAt.UTC().Format(time.RFC3339),
			cs.TenantID, cs.AccountPeriod, cs.RecordID, cs.Operation, cs.Reason, cs.Status, cs.Subject, dash(cs.StoredAmount), dash(cs.IncomingAmount),
			dash(strings.Join(cs.Differs, ",")))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the cases: %w", err)
	}
	if len(page.Cases) == 0 {
		fmt.Fprintln(a.stdout, c.noneMatch())
	}
	if page.Next != "" {
		fmt.Fprintf(a.stdout, "more: add --after %s\n", page.Next)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// caseArg is a case id argument.
type caseArg struct {
	Case caseID `arg:"" name:"case" help:"Case id, e.g. 42."`
}

type conflictsShowCmd struct {
	readFlags `embed:""`
	caseArg   `embed:""`
	JSON      bool `name:"json" help:"Print JSON (the API's /api/cases/CASE)."`
}

func (c *conflictsShowCmd) Run(a *app) error {
	cs, err := loadCase(a, c.readFlags, int64(c.Case))
	if err != nil || c.JSON {
		if err == nil {
			err = printJSON(a, cs)
		}
		return err
	}
	w := a.stdout
	fmt.Fprintf(w, "case %d  %s  (%s)\n", cs.ID, cs.Status, cs.Reason)
	fmt.Fprintf(w, "identity: %s / %s / %s / %s\n", cs.TenantID, cs.AccountPeriod, cs.RecordID, cs.Operation)
	if cs.Detail != "" {
		fmt.Fprintf(w, "detail:   %s\n", cs.Detail)
	}
	fmt.Fprintf(w, "opened:   %s\n", cs.OpenedAt.UTC().Format(time.RFC3339))
	if cs.ClosedAt != nil {
		fmt.Fprintf(w, "closed:   %s\n", cs.ClosedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	if err := writeSideBySide(w, cs); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writeDeliveries(w, cs.Deliveries); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if r := cs.Resolution; r != nil {
		fmt.Fprintf(w, "resolution: %s by %s at %s: %s\n", r.Decision, r.By, r.At.UTC().Format(time.RFC3339), r.Reason)
		if r.Amount != "" {
			fmt.Fprintf(w, "  stated amount %s\n", r.Amount)
		}
		if r.SettlementID != "" {
			fmt.Fprintf(w, "  settled as %s (settle explain %s %s %d)\n", r.SettlementID, cs.TenantID, cs.AccountPeriod, cs.ID)
		}
	} else if cs.Status == inspect.CaseOpen {
		fmt.Fprintf(w, "unresolved: settle conflicts resolve %d --accept|--reject --reason WHY [--amount X]\n", cs.ID)
	}
	return nil
}

type conflictsDiffCmd struct {
	readFlags `embed:""`
	caseArg   `embed:""`
	JSON      bool `name:"json" help:"Print JSON (the API's /api/cases/CASE)."`
}

func (c *conflictsDiffCmd) Run(a *app) error {
	cs, err := loadCase(a, c.readFlags, int64(c.Case))
	if err != nil || c.JSON {
		if err == nil {
			err = printJSON(a, cs)
		}
		return err
	}
	if err := writeSideBySide(a.stdout, cs); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if err := writeDeliveries(a.stdout, cs.Deliveries); err != nil {
		return err
	}
	return nil
}

func loadCase(a *app, f readFlags, id int64) (*inspect.Case, error) {
	store, done, err := f.openReadStore(a)
	if err != nil {
		return nil, err
	}
	defer done()
	return inspect.New(store).Case(a.ctx, id)
}

// writeSideBySide prints the fields of both payloads, "!" marking the ones
// that differ and "-" a field absent on one side.
func writeSideBySide(w io.Writer, cs *inspect.Case) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	stored := "STORED"
	if string(cs.Stored) == "null" {
		stored = "STORED (none: rule-based case)"
	}
	fmt.Fprintf(tw, " \tFIELD\t%s\tINCOMING\n", stored)
	for _, f := range cs.Fields {
		mark := " "
		if f.Differs {
			mark = "!"
		}
		sv, iv := f.Stored, f.Incoming
		if !f.StoredPresent {
			sv = "-"
		}
		if !f.IncomingPresent {
			iv = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, f.Field, sv, iv)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the fields: %w", err)
	}
	fmt.Fprintf(w, "%d differing: %s\n", len(cs.Differing), strings.Join(cs.Differing, ", "))
	return nil
}

func writeDeliveries(w io.Writer, ds []inspect.Delivery) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tOUTCOME\tAT")
	for _, d := range ds {
		out := d.Outcome
		if d.Reason != "" {
			out += " (" + d.Reason + ")"
		}
		fmt.Fprintf(tw, "%s/%d@%d\t%s\t%s\n", d.Topic, d.Partition, d.Offset, out, d.At.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the deliveries: %w", err)
	}
	return nil
}

type conflictsResolveCmd struct {
	storeFlags `embed:""`
	caseArg    `embed:""`
	Accept     bool   `name:"accept" xor:"decision" required:"" help:"Accept: settle the incoming payload (or --amount) as a correction linked to the stored record."`
	Reject     bool   `name:"reject" xor:"decision" required:"" help:"Reject: no effect, the stored record stands."`
	Amount     string `name:"amount" help:"The chain's new total you state (accept only); default: the incoming payload's amount."`
	Reason     string `name:"reason" required:"" help:"Why (kept forever with the resolution)."`
	As         string `name:"as" env:"SETTLE_ANALYST" help:"A note of whom you resolve for: the resolution records your database login, then \"(as NAME)\"."`
	JSON       bool   `name:"json" help:"Print JSON (the API's resolve answer)."`
}

func (c *conflictsResolveCmd) Run(a *app) error {
	req := settle.ResolveRequest{CaseID: int64(c.Case), Decision: "accept", Amount: strings.TrimSpace(c.Amount),
		Reason: strings.TrimSpace(c.Reason)}
	if c.Reject {
		req.Decision = "reject"
		if req.Amount != "" {
			return usageError{"--amount goes with --accept only"}
		}
	}
	if req.Reason == "" {
		return usageError{"--reason must not be empty"}
	}
	store, done, err := c.openStore(a)
	if err != nil {
		return err
	}
	defer done()
	who, err := whoIs(a.ctx, store.Pool())
	if err != nil {
		return err
	}
	if err := who.mayResolve(); err != nil {
		return err
	}
	req.By = who.author(strings.TrimSpace(c.As))
	res, err := store.Resolve(a.ctx, req)
	if err != nil {
		return err
	}
	if res.Replayed && res.Decision != req.Decision {
		// As the API's 409: a case is resolved once.
		return fmt.Errorf("case %d was already resolved (%s, status %s); a case is resolved once, so --%s changed nothing (settle conflicts show %d)",
			res.CaseID, res.Decision, res.Status, req.Decision, res.CaseID)
	}
	if c.JSON {
		return printJSON(a, res)
	}
	switch {
	case res.Replayed:
		fmt.Fprintf(a.stdout, "case %d was already resolved (%s, status %s): nothing changed\n", res.CaseID, res.Decision, res.Status)
	case res.SettlementID != "":
		fmt.Fprintf(a.stdout, "case %d %s: settled as %s\n", res.CaseID, res.Status, res.SettlementID)
	default:
		fmt.Fprintf(a.stdout, "case %d %s\n", res.CaseID, res.Status)
	}
	return nil
}

type conflictsExportCmd struct {
	readFlags       `embed:""`
	caseFilterFlags `embed:""`
	Format          string `name:"format" enum:"csv,json" default:"csv" help:"csv or json."`
	Output          string `name:"output" short:"o" default:"-" help:"File to write; - is stdout."`
}

// exportRowsMax caps one export: beyond it, narrow the filters. A
// variable for the test that reaches it.
var exportRowsMax = 10_000_000

func (c *conflictsExportCmd) Run(a *app) (err error) {
	f, err := c.filter(time.Now())
	if err != nil {
		return err
	}
	store, done, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer done()
	out := a.stdout
	if c.Output != "-" {
		file, err := os.Create(c.Output)
		if err != nil {
			return usageError{err.Error()}
		}
		// A file's Close can be where its last write fails: an export
		// cut short must not exit 0.
		defer func() {
			if cerr := file.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("export cases to %s: %w", c.Output, cerr)
			}
		}()
		out = file
	}
	x := &caseExport{out: out, first: true}
	if c.Format == "csv" {
		x.cw = csv.NewWriter(out)
	}
	if err := x.start(); err != nil {
		return fmt.Errorf("export cases: %w", err)
	}
	f.Limit = inspect.CasePageRowsMax
	for n := 0; ; {
		page, err := inspect.New(store).ListCases(a.ctx, f)
		if err != nil {
			return usageIfBad(err)
		}
		if err := x.page(a.ctx, store, page.Cases); err != nil {
			return err
		}
		n += len(page.Cases)
		if page.Next == "" {
			break
		}
		if n >= exportRowsMax {
			// Not a silent cut: what was written is not the whole export.
			return fmt.Errorf("export cases: more than %d cases under these filters, the most one export writes; "+
				"the output holds the first %d and is incomplete: narrow the filters (--tenant, --period, --reason, ages)", exportRowsMax, n)
		}
		f.After = page.Next
	}
	return x.end()
}

// caseExport writes an export of cases as CSV (cw set) or as one JSON
// array: start, then each page of cases, then end.
type caseExport struct {
	out   io.Writer
	cw    *csv.Writer
	first bool // no case written yet (JSON)
}

func (x *caseExport) start() error {
	if x.cw != nil {
		return x.cw.Write(analyst.CaseCSVHeader)
	}
	_, err := io.WriteString(x.out, "[")
	return err
}

// page writes one page of cases; a CSV row carries the case's resolution.
func (x *caseExport) page(ctx context.Context, store *settle.Store, cases []inspect.CaseSummary) error {
	if x.cw != nil {
		ids := make([]int64, len(cases))
		for i, cs := range cases {
			ids[i] = cs.ID
		}
		resolutions, err := inspect.New(store).CaseResolutions(ctx, ids)
		if err != nil {
			return err
		}
		for _, cs := range cases {
			var res *inspect.CaseResolution
			if r, ok := resolutions[cs.ID]; ok {
				res = &r
			}
			if err := x.cw.Write(analyst.CaseCSVRow(cs, res)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, cs := range cases {
		b, err := json.Marshal(cs)
		if err != nil {
			return err
		}
		sep := ",\n"
		if x.first {
			sep = "\n"
		}
		x.first = false
		if _, err := io.WriteString(x.out, sep); err != nil {
			return fmt.Errorf("export cases: %w", err)
		}
		if _, err := x.out.Write(b); err != nil {
			return fmt.Errorf("export case %d: %w", cs.ID, err)
		}
	}
	return nil
}

func (x *caseExport) end() error {
	if x.cw != nil {
		x.cw.Flush()
		return x.cw.Error()
	}
	_, err := io.WriteString(x.out, "\n]\n")
	return err
}

// jsonLine writes v as one line of JSON.
func jsonLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
