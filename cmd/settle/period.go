package main

import "fmt"

// periodCmd groups period commands.
type periodCmd struct {
	Close periodCloseCmd `cmd:"" help:"Close a period: its later records settle, flagged late."`
}

type periodCloseCmd struct {
	storeFlags `embed:""`
	Tenant     string `arg:"" help:"Tenant id."`
	Period     string `arg:"" help:"Account period, YYYY-MM."`
	As         string `name:"as" env:"SETTLE_OPERATOR" help:"Who closes it, for the record."`
}

// Run closes the period.
func (c *periodCloseCmd) Run(a *app) error {
	if len(c.Period) != 7 || c.Period[4] != '-' {
		return usageError{fmt.Sprintf("period %q: use YYYY-MM", c.Period)}
	}
	store, closeDB, err := c.openStore(a)
	if err != nil {
		return err
	}
	defer closeDB()
	already, err := store.ClosePeriod(a.ctx, c.Tenant, c.Period, c.As)
	if err != nil {
		return err
	}
	if already {
		fmt.Fprintf(a.stdout, "period %s of %s was already closed\n", c.Period, c.Tenant)
	} else {
		fmt.Fprintf(a.stdout, "closed period %s of %s: later records settle flagged late\n", c.Period, c.Tenant)
	}
	return nil
}
