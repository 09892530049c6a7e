package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// periodCmd groups period commands.
type periodCmd struct {
	Close periodCloseCmd `cmd:"" help:"Close a period: its later records settle, flagged late."`
}

type periodCloseCmd struct {
	storeFlags `embed:""`
	Tenant     string `arg:"" help:"Tenant id."`
	Period     string `arg:"" help:"Account period, YYYY-MM."`
	As         string `name:"as" env:"SETTLE_OPERATOR" help:"A note of whom you close it for: the record names your database login, then \"(as NAME)\"."`
}

// Run closes the period.
func (c *periodCloseCmd) Run(a *app) error {
	if err := checkPeriod("period", c.Period); err != nil {
		return err
	}
	store, closeDB, err := c.openStore(a)
	if err != nil {
		return err
	}
	defer closeDB()
	who, err := whoIs(a.ctx, store.Pool())
	if err != nil {
		return err
	}
	if err := who.mayOperate("closing a period"); err != nil {
		return err
	}
	already, err := store.ClosePeriod(a.ctx, c.Tenant, c.Period, who.author(strings.TrimSpace(c.As)))
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

// checkPeriod refuses what is not an account period (YYYY-MM, month 01 to
// 12, as the input grammar has it) before anything connects; what names the
// argument or flag.
func checkPeriod(what, s string) error {
	if _, err := time.Parse("2006-01", s); err != nil || len(s) != 7 {
		return usageError{fmt.Sprintf("%s %q: want YYYY-MM with a month from 01 to 12, e.g. %s", what, s, time.Now().UTC().Format("2006-01"))}
	}
	return nil
}

// caseID is a conflict case id argument; its parse error says what one
// looks like instead of kong's "expected a valid 64 bit int".
type caseID int64

// Decode reads a positive decimal case id.
func (c *caseID) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("case", &s); err != nil {
		return err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("case id must be a number, e.g. 42 (got %q; settle conflicts list shows the ids)", s)
	}
	*c = caseID(n)
	return nil
}
