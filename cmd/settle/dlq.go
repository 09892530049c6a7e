package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// dlqCmd inspects and replays dead letters.
type dlqCmd struct {
	List   dlqListCmd   `cmd:"" help:"List dead letters (--parked: outbox messages the broker refused for good)."`
	Show   dlqShowCmd   `cmd:"" help:"Print one dead letter with its original headers and bytes."`
	Replay dlqReplayCmd `cmd:"" help:"Send dead letters back to their source topic."`
	Resend dlqResendCmd `cmd:"" help:"Correct a dead letter's record and resend it."`
}

type dlqListCmd struct {
	readFlags `embed:""`
	Reason    string `name:"reason" help:"Only this reason (invalid_json, too_large, invalid_field, transient_exhausted)."`
	After     int64  `name:"after" help:"Only dead letters with an id above this one (paging)."`
	Limit     int    `name:"limit" default:"100" help:"Most dead letters listed (at most 1000)."`
	JSON      bool   `name:"json" help:"Print JSON (the API's /api/dlq)."`
	Parked    bool   `name:"parked" help:"List the outbox messages the relay parked instead: the broker refused them for good (too large, invalid), so they were not published."`
}

func (c *dlqListCmd) Run(a *app) error {
	store, done, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer done()
	if c.Parked {
		return c.parked(a, store)
	}
	ds, err := inspect.New(store).DeadLetters(a.ctx, inspect.DeadLetterFilter{Reason: c.Reason, AfterID: c.After, Limit: c.Limit})
	if err != nil {
		return usageIfBad(err)
	}
	if c.JSON {
		return printJSON(a, ds)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tREASON\tATTEMPTS\tREPLAYED\tAT\tERROR")
	for _, d := range ds {
		fmt.Fprintf(tw, "%d\t%s/%d@%d\t%s\t%d\t%d\t%s\t%s\n", d.ID, d.Source.Topic, d.Source.Partition, d.Source.Offset,
			d.Reason, d.Attempts, d.Replays, d.At.UTC().Format(time.RFC3339), truncate(d.Error, 100))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the dead letters: %w", err)
	}
	if len(ds) == 0 {
		fmt.Fprintln(a.stdout, "no dead letters")
	} else if len(ds) == c.Limit {
		fmt.Fprintf(a.stdout, "more: add --after %d\n", ds[len(ds)-1].ID)
	}
	return nil
}

// parked lists the parked outbox rows.
func (c *dlqListCmd) parked(a *app, store *settle.Store) error {
	if c.Reason != "" {
		return usageError{"--reason filters dead letters, not parked messages"}
	}
	ps, err := inspect.New(store).OutboxParked(a.ctx, c.After, c.Limit)
	if err != nil {
		return usageIfBad(err)
	}
	if c.JSON {
		return printJSON(a, ps)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTBOX ROW\tTOPIC\tREASON\tBYTES\tSOURCE\tPARKED AT\tERROR")
	for _, p := range ps {
		source := "-"
		if t := headerOf(p.Headers, "dlq_source_topic"); t != "" {
			source = t + "/" + headerOf(p.Headers, "dlq_source_partition") + "@" + headerOf(p.Headers, "dlq_source_offset")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.Topic, p.Reason, p.ValueBytes, source,
			p.ParkedAt.UTC().Format(time.RFC3339), truncate(p.Error, 100))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the dead letters: %w", err)
	}
	if len(ps) == 0 {
		fmt.Fprintln(a.stdout, "no parked messages")
	} else if len(ps) == c.Limit {
		fmt.Fprintf(a.stdout, "more: add --after %d\n", ps[len(ps)-1].ID)
	}
	return nil
}

// headerOf is the value of the header named key, "" when there is none.
func headerOf(hs []record.Header, key string) string {
	v, _ := record.HeaderValue(hs, key)
	return v
}

type dlqShowCmd struct {
	readFlags `embed:""`
	ID        int64 `arg:"" name:"id" help:"Dead letter id (settle dlq list)."`
	JSON      bool  `name:"json" help:"Print JSON (key and value in base64)."`
	Value     bool  `name:"value" help:"Print only the original value, byte for byte (to redirect to a file)."`
}

// Run prints the dead letter. The text form prints the value as it is
// when it is valid UTF-8, else in base64, and says which.
func (c *dlqShowCmd) Run(a *app) error {
	store, done, err := c.openReadStore(a)
	if err != nil {
		return err
	}
	defer done()
	d, err := inspect.New(store).DeadLetter(a.ctx, c.ID)
	if err != nil {
		return err
	}
	switch {
	case c.JSON:
		return printJSON(a, d)
	case c.Value:
		_, err := a.stdout.Write(d.Value)
		return err
	}
	fmt.Fprintf(a.stdout, "dead letter %d: %s from %s/%d@%d, %d attempt(s), at %s\n", d.ID, d.Reason, d.Source.Topic,
		d.Source.Partition, d.Source.Offset, d.Attempts, d.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(a.stdout, "error (%s): %s\n", d.ErrorClass, d.Error)
	if d.Replays > 0 {
		fmt.Fprintf(a.stdout, "replayed %d time(s); settle dlq replay leaves it out unless --again\n", d.Replays)
	}
	fmt.Fprintf(a.stdout, "key: %s\n", printable(d.Key))
	fmt.Fprintf(a.stdout, "headers: %d\n", len(d.Headers))
	for _, h := range d.Headers {
		fmt.Fprintf(a.stdout, "  %s: %s\n", h.Key, printable(h.Value))
	}
	fmt.Fprintf(a.stdout, "value: %d bytes, %s\n", len(d.Value), printable(d.Value))
	return nil
}

// printable is b as text when it is valid UTF-8 without control
// characters other than newlines and tabs, else "base64:" and its base64.
func printable(b []byte) string {
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		return string(b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type dlqReplayCmd struct {
	storeFlags `embed:""`
	kafkaFlags `embed:""`
	ID         int64  `name:"id" help:"Replay only this dead letter; default: every one not replayed before (that existed when the replay started)."`
	Reason     string `name:"reason" help:"Replay only dead letters with this reason."`
	Again      bool   `name:"again" help:"Replay the dead letters replayed before too."`
	DryRun     bool   `name:"dry-run" help:"Say what would be replayed; produce nothing."`
	JSON       bool   `name:"json" help:"Print one JSON object per dead letter."`
}

// replayed is what a replay did with one dead letter.
type replayed struct {
	ID     int64                `json:"id"`
	Reason string               `json:"reason"`
	From   message.Coordinates  `json:"from"`
	To     *message.Coordinates `json:"to,omitempty"` // nil on a dry run
	DryRun bool                 `json:"dry_run,omitempty"`
}

func (c *dlqReplayCmd) Run(a *app) error {
	store, done, err := c.openStore(a)
	if err != nil {
		return err
	}
	defer done()
	if !c.DryRun {
		who, err := whoIs(a.ctx, store.Pool())
		if err != nil {
			return err
		}
		if err := who.mayOperate("replaying dead letters"); err != nil {
			return err
		}
	}
	batch, next, err := c.deadLetters(a, store)
	if err != nil {
		return err
	}
	var cl *kgo.Client
	if !c.DryRun && len(batch) > 0 {
		var err error
		if cl, err = c.kafkaSecurityFlags.producer(a, c.Brokers); err != nil {
			return err
		}
		defer cl.Close()
		if err := awaitBroker(a.ctx, cl, c.Brokers, 10*time.Second, ""); err != nil {
			return err
		}
	}
	n := 0
	for len(batch) > 0 {
		if err := c.replay(a, cl, store, batch, &n); err != nil {
			return err
		}
		if batch, err = next(); err != nil {
			return err
		}
	}
	if !c.JSON {
		verb := "replayed"
		if c.DryRun {
			verb = "would replay"
		}
		fmt.Fprintf(a.stdout, "%s %d dead letter(s); records already settled come back as duplicates\n", verb, n)
	}
	return nil
}

// deadLetters returns the first batch of dead letters to replay and next,
// which returns the batch after the last one it returned: the one dead
// letter of --id, or those of --reason up to the newest there is now, 500
// at a time.
func (c *dlqReplayCmd) deadLetters(a *app, store *settle.Store) (first []inspect.DeadLetter, next func() ([]inspect.DeadLetter, error), err error) {
	next = func() ([]inspect.DeadLetter, error) { return nil, nil }
	if c.ID != 0 {
		d, err := inspect.New(store).DeadLetter(a.ctx, c.ID)
		if err != nil {
			return nil, nil, err
		}
		return []inspect.DeadLetter{*d}, next, nil
	}
	upTo, err := inspect.New(store).DeadLetterMaxID(a.ctx)
	if err != nil {
		return nil, nil, err
	}
	var after int64
	next = func() ([]inspect.DeadLetter, error) {
		ds, err := inspect.New(store).DeadLetters(a.ctx, inspect.DeadLetterFilter{Reason: c.Reason, AfterID: after, UpToID: upTo, Limit: 500,
			NotReplayed: !c.Again})
		if len(ds) > 0 {
			after = ds[len(ds)-1].ID
		}
		return ds, err
	}
	if first, err = next(); err != nil {
		return nil, nil, err
	}
	return first, next, nil
}

// replay replays one batch through cl (nil on a dry run) and prints each
// dead letter, counting them in n.
func (c *dlqReplayCmd) replay(a *app, cl *kgo.Client, store *settle.Store, batch []inspect.DeadLetter, n *int) error {
	var (
		to  []message.Coordinates
		err error
	)
	if cl != nil {
		pctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
		to, err = service.ReplayDeadLetters(pctx, cl, store, batch)
		cancel()
	}
	for i, d := range batch {
		out := replayed{ID: d.ID, Reason: d.Reason, From: d.Source, DryRun: c.DryRun}
		if cl != nil {
			if i >= len(to) {
				if *n > 0 {
					return fmt.Errorf("%w; %d dead letter(s) of the batches before were replayed", err, *n)
				}
				return err
			}
			out.To = &to[i]
		}
		*n++
		switch {
		case c.JSON:
			if err := jsonLine(a.stdout, out); err != nil {
				return err
			}
		case c.DryRun:
			again := ""
			if d.FailsAgain() {
				again = "; it fails again: its own bytes failed (invalid_input), have the producer send it corrected"
			}
			fmt.Fprintf(a.stdout, "would replay dead letter %d (%s) from %s/%d@%d to %s%s\n", d.ID, d.Reason, d.Source.Topic, d.Source.Partition, d.Source.Offset, d.Source.Topic, again)
		default:
			fmt.Fprintf(a.stdout, "replayed dead letter %d (%s) from %s/%d@%d as %s/%d@%d\n", d.ID, d.Reason, d.Source.Topic,
				d.Source.Partition, d.Source.Offset, out.To.Topic, out.To.Partition, out.To.Offset)
		}
	}
	return nil
}

type dlqResendCmd struct {
	databaseFlags `embed:""`
	kafkaFlags    `embed:""`
	ID            int64    `arg:"" name:"id" help:"Dead letter id (settle dlq list)."`
	Set           []string `name:"set" sep:"none" help:"A change: field=text sets a string, field:=json any JSON value (12.50, true, an object). Repeat for more."`
	Unset         []string `name:"unset" sep:"none" help:"A field to remove. Repeat for more."`
	Reason        string   `name:"reason" required:"" help:"Why the record is corrected (recorded with the database login)."`
	DryRun        bool     `name:"dry-run" help:"Print the changes and the record that would be sent; record and send nothing."`
	JSON          bool     `name:"json" help:"Print JSON (the API's POST /api/dlq/{id}/resend answer)."`
}

// Run corrects the dead letter and resends it: the edit is recorded under
// the database login (who) with --reason (why); the letter keeps its bytes.
func (c *dlqResendCmd) Run(a *app) error {
	var edits []inspect.FieldEdit
	for _, s := range c.Set {
		e, err := inspect.ParseFieldEdit(s)
		if err != nil {
			return usageError{err.Error()}
		}
		edits = append(edits, e)
	}
	for _, f := range c.Unset {
		edits = append(edits, inspect.FieldEdit{Field: f})
	}
	if len(edits) == 0 {
		return usageError{"name a change: --set field=text, --set field:=json or --unset field"}
	}
	if strings.TrimSpace(c.Reason) == "" {
		return usageError{"--reason: say why the record is corrected"}
	}
	store, done, err := storeFlags{databaseFlags: c.databaseFlags}.openStore(a)
	if err != nil {
		return err
	}
	defer done()
	d, err := inspect.New(store).DeadLetter(a.ctx, c.ID)
	if err != nil {
		return err
	}
	value, diff, err := inspect.EditValue(d.Value, edits)
	if err != nil {
		return usageError{fmt.Sprintf("dead letter %d: %v", d.ID, err)}
	}
	if c.DryRun {
		printDiff(a, d.ID, diff)
		fmt.Fprintf(a.stdout, "would send to %s: %s\n", d.Source.Topic, value)
		return nil
	}
	who, err := whoIs(a.ctx, store.Pool())
	if err != nil {
		return err
	}
	if err := who.mayOperate("correcting and resending a dead letter"); err != nil {
		return err
	}
	cl, err := c.kafkaSecurityFlags.producer(a, c.Brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := awaitBroker(a.ctx, cl, c.Brokers, 10*time.Second, ""); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	res, err := service.ResendDeadLetter(pctx, cl, store, service.Resend{Letter: *d, Edits: edits, By: who.name, Reason: strings.TrimSpace(c.Reason)})
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, res)
	}
	printDiff(a, d.ID, res.Diff)
	fmt.Fprintf(a.stdout, "resent dead letter %d as %s/%d@%d: correction %d by %s; it settles like any record (settle explain shows it)\n",
		d.ID, res.To.Topic, res.To.Partition, res.To.Offset, res.EditID, res.By)
	return nil
}

func printDiff(a *app, id int64, diff []inspect.FieldChange) {
	fmt.Fprintf(a.stdout, "dead letter %d, %d field(s) changed:\n", id, len(diff))
	for _, ch := range diff {
		fmt.Fprintf(a.stdout, "  %s: %s -> %s\n", ch.Field, ch.From, ch.To)
	}
}
