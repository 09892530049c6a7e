package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/settlehq/settle/settle/inspect"
)

// balanceCmd shows a tenant's accounts: balance, holds, available, the
// chains (net view) and the rows behind them.
type balanceCmd struct {
	readFlags `embed:""`
	Tenant    string `arg:"" help:"Tenant id."`
	Subject   string `arg:"" optional:"" help:"Account subject; without it, every account of the tenant."`
	Rows      int    `name:"rows" default:"20" help:"Newest ledger rows (and chains) shown per account."`
	JSON      bool   `name:"json" help:"Print JSON."`
}

// Run prints the balances.
func (c *balanceCmd) Run(a *app) error {
	store, closeDB, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer closeDB()
	accounts, err := inspect.New(store).Balances(a.ctx, c.Tenant, c.Subject, c.Rows)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, accounts)
	}
	if len(accounts) == 0 {
		fmt.Fprintf(a.stdout, "no accounts for tenant %q%s\n", c.Tenant, map[bool]string{true: " and subject " + c.Subject}[c.Subject != ""])
		return nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, v := range accounts {
		fmt.Fprintf(w, "%s %s\tbalance %s\theld %s\tavailable %s\tsequence %d\n", v.Subject, v.Currency, v.Balance, v.Held, v.Available, v.Sequence)
		for _, h := range v.Holds {
			exp := "no expiry"
			if h.ExpiresAt != nil {
				exp = "expires " + h.ExpiresAt.Format("2006-01-02T15:04:05Z07:00")
			}
			fmt.Fprintf(w, "  hold %s/%s\tamount %s\tremaining %s\t%s\n", h.Period, h.RecordID, h.Amount, h.Remaining, exp)
		}
		for _, ch := range v.Chains {
			state := ""
			switch {
			case ch.Reclaimed:
				state = "refunded " + ch.Refunded + ", reclaimed"
			case ch.Refunded != "":
				state = "refunded " + ch.Refunded
			case ch.Recovered:
				state = "success recorded"
			}
			fmt.Fprintf(w, "  chain %s/%s\tnet %s\tversion %d\tadjustments %d\t%s\n", ch.Period, ch.RootRecord, ch.NetCharge, ch.Version, ch.Adjustments, state)
		}
		for _, r := range v.Rows {
			fmt.Fprintf(w, "  row %d\t%s to %s\tthen balance %s, held %s\t%s %s/%s\t%s\n", r.ID, r.Amount, r.Bucket, r.BalanceAfter, r.HeldAfter,
				r.Operation, r.Period, r.RecordID, r.At.Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	return w.Flush()
}
