package main

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/settlehq/settle/settle/inspect"
)

// statementCmd prints a tenant's statement for one period.
type statementCmd struct {
	readFlags `embed:""`
	Tenant    string `arg:"" help:"Tenant id."`
	Period    string `arg:"" help:"Account period, YYYY-MM."`
	Subject   string `name:"subject" help:"One account subject; default every account of the tenant."`
	Rows      bool   `name:"rows" help:"List the ledger rows behind every line (CSV: one row per ledger row)."`
	JSON      bool   `name:"json" help:"Print JSON."`
	CSV       bool   `name:"csv" help:"Print CSV: one row per statement line, with the account's opening and closing rows."`
}

// Run prints the statement; it exits 3 when an account's statement does
// not add up to its ledger.
func (c *statementCmd) Run(a *app) error {
	if _, err := time.Parse("2006-01", c.Period); err != nil {
		return usageError{fmt.Sprintf("period %q: want YYYY-MM", c.Period)}
	}
	if c.JSON && c.CSV {
		return usageError{"--json and --csv: choose one"}
	}
	store, closeDB, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer closeDB()
	st, err := inspect.New(store).Statement(a.ctx, inspect.StatementInput{TenantID: c.Tenant, Period: c.Period, Subject: c.Subject, Rows: c.Rows})
	if err != nil {
		return err
	}
	switch {
	case c.JSON:
		err = printJSON(a, st)
	case c.CSV:
		err = c.printCSV(a, st)
	default:
		err = printStatement(a, st, c.Rows)
	}
	if err != nil {
		return err
	}
	if !st.Ties() {
		return exitError{code: exitMismatch, err: fmt.Errorf("the statement of %s %s does not add up to the ledger", c.Tenant, c.Period)}
	}
	return nil
}

func printStatement(a *app, st *inspect.Statement, rows bool) error {
	closed := "open"
	if st.ClosedAt != nil {
		closed = "closed " + st.ClosedAt.UTC().Format(time.RFC3339) + " by " + st.ClosedBy
	}
	fmt.Fprintf(a.stdout, "statement %s %s (%s)\n", st.TenantID, st.Period, closed)
	if len(st.Accounts) == 0 {
		fmt.Fprintln(a.stdout, "no account has ledger rows in or before this period")
		return nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, ac := range st.Accounts {
		fmt.Fprintf(w, "\n%s %s\tsettlements %d\tsequence %d-%d\t\n", ac.Subject, ac.Currency, ac.Settlements, ac.FirstSequence, ac.LastSequence)
		fmt.Fprintf(w, "  opening\tbalance %s\theld %s\t\n", ac.OpeningBalance, ac.OpeningHeld)
		late := false
		for _, l := range ac.Lines {
			if l.Late && !late {
				fmt.Fprintf(w, "  late (settled after the period closed):\t\t\t\n")
				late = true
			}
			name := l.Category
			if l.Meter != "" {
				name += " " + l.Meter
			}
			fmt.Fprintf(w, "  %s\t%s %s\t%s, %d settlements\tsequence %d-%d\n", name, l.Bucket, l.Amount, l.RowSpan(), l.Settlements, l.FirstSequence, l.LastSequence)
			if rows {
				for _, r := range l.LedgerRows {
					fmt.Fprintf(w, "    row %d\t%s\t%s seq %d\t%s\n", r.ID, r.Amount, r.RecordID, r.Sequence, r.At.UTC().Format(time.RFC3339))
				}
			}
		}
		fmt.Fprintf(w, "  closing\tbalance %s\theld %s\t\n", ac.ClosingBalance, ac.ClosingHeld)
		if ac.LaterBalance != "0" || ac.LaterHeld != "0" {
			fmt.Fprintf(w, "  later periods\tbalance %s\theld %s\t\n", ac.LaterBalance, ac.LaterHeld)
		}
		fmt.Fprintf(w, "  account now\tbalance %s\theld %s\t\n", ac.Balance, ac.Held)
		if !ac.Ties {
			fmt.Fprintf(w, "  DOES NOT ADD UP: %s\t\t\t\n", ac.Mismatch)
		}
	}
	return w.Flush()
}

// printCSV writes one row per line, framed by each account's opening and
// closing rows (category "opening", "closing"); with --rows, one row per
// ledger row instead of per line.
func (c *statementCmd) printCSV(a *app, st *inspect.Statement) error {
	w := csv.NewWriter(a.stdout)
	i := strconv.FormatInt
	head := []string{"tenant_id", "account_period", "subject", "currency", "category", "operation", "meter", "bucket", "late", "amount",
		"rows", "settlements", "first_row_id", "last_row_id", "first_sequence", "last_sequence"}
	if c.Rows {
		head = append(head, "ledger_row_id", "record_id", "settlement_id", "sequence")
	}
	_ = w.Write(head)
	for _, ac := range st.Accounts {
		base := []string{st.TenantID, st.Period, ac.Subject, ac.Currency}
		frame := func(cat, bucket, amount string) {
			r := append(append([]string{}, base...), cat, "", "", bucket, "false", amount, "", "", "", "", "", "")
			if c.Rows {
				r = append(r, "", "", "", "")
			}
			_ = w.Write(r)
		}
		frame("opening", "balance", ac.OpeningBalance)
		frame("opening", "held", ac.OpeningHeld)
		for _, l := range ac.Lines {
			line := append(append([]string{}, base...), l.Category, l.Operation, l.Meter, l.Bucket, strconv.FormatBool(l.Late), l.Amount,
				i(l.Rows, 10), i(l.Settlements, 10), i(l.FirstRowID, 10), i(l.LastRowID, 10), i(l.FirstSequence, 10), i(l.LastSequence, 10))
			if !c.Rows {
				_ = w.Write(line)
				continue
			}
			for _, r := range l.LedgerRows {
				row := append([]string{}, line...)
				row[9] = r.Amount
				_ = w.Write(append(row, i(r.ID, 10), r.RecordID, r.SettlementID, i(r.Sequence, 10)))
			}
		}
		frame("closing", "balance", ac.ClosingBalance)
		frame("closing", "held", ac.ClosingHeld)
	}
	w.Flush()
	return w.Error()
}
