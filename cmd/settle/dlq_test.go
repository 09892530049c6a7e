package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
)

// TestDLQShowAndParked: a record over the dead-letter message's value
// limit is kept whole in the database: settle dlq show prints its bytes
// and headers (text, --json, --value), while its outbox message carries no
// value and says how long it was. A parked outbox message is listed by
// settle dlq list --parked with its reason and source, and reconcile
// reports it as parked.
func TestDLQShowAndParked(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	big := []byte(`{"tenant_id":"acme","pad":"` + strings.Repeat("x", settle.DeadLetterValueBytesMaxDefault) + `"}`)
	rs := d.settle(t, message.Input{Topic: "usage", Partition: 0, Offset: 7, Key: []byte("acme/cust-1"), Value: big,
		Headers: []record.Header{{Key: "origin", Value: []byte("test")}}})
	if rs[0].Outcome != message.OutcomeDeadLettered || rs[0].Reason != "too_large" {
		t.Fatalf("fixture: %+v", rs[0])
	}
	ctx := context.Background()
	ds, err := inspect.New(d.store).DeadLetters(ctx, inspect.DeadLetterFilter{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("dead letters: %v %v", ds, err)
	}
	id := fmt.Sprint(ds[0].ID)

	if out := d.cli(t, 0, "dlq", "show", id, "--value"); out != string(big) {
		t.Errorf("dlq show --value: %d bytes, want the record's %d", len(out), len(big))
	}
	var got inspect.DeadLetter
	if err := json.Unmarshal([]byte(d.cli(t, 0, "dlq", "show", id, "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Value) != string(big) || got.Reason != "too_large" || len(got.Headers) != 1 || got.Headers[0].Key != "origin" {
		t.Errorf("dlq show --json: reason %s, %d value bytes, headers %v", got.Reason, len(got.Value), got.Headers)
	}
	out := d.cli(t, 0, "dlq", "show", id)
	for _, want := range []string{"too_large from usage/0@7", "origin: test", fmt.Sprintf("value: %d bytes, {\"tenant_id\"", len(big))} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%.300s", want, out)
		}
	}
	d.cli(t, 1, "dlq", "show", "424242")

	// The outbox message: no value, its length in a header.
	var value []byte
	var headers []byte
	if err := d.store.Pool().QueryRow(ctx, `SELECT value, headers FROM outbox_messages WHERE topic = 'usage.dlq'`).Scan(&value, &headers); err != nil {
		t.Fatal(err)
	}
	var hs []record.Header // {key, value (base64)}, as every headers column stores them
	if err := json.Unmarshal(headers, &hs); err != nil {
		t.Fatal(err)
	}
	if len(value) != 0 || headerOf(hs, message.DeadLetterValueTruncatedHeader) != fmt.Sprint(len(big)) {
		t.Errorf("dead-letter outbox message: %d value bytes, headers %v", len(value), hs)
	}

	if out := d.cli(t, 0, "dlq", "list", "--parked"); !strings.Contains(out, "no parked messages") {
		t.Errorf("dlq list --parked before any: %s", out)
	}
	// Park it as the relay does when the broker refuses a message for good.
	lease, err := outbox.New(d.store).Lease(ctx, relay.LockKeyDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(ctx)
	if held, err := lease.TryAcquire(ctx); err != nil || !held {
		t.Fatalf("lease: %v %v", held, err)
	}
	pending, err := lease.Pending(ctx, 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %v %v", pending, err)
	}
	if err := lease.Park(ctx, []outbox.Park{{ID: pending[0].ID, Reason: "message_too_large", Error: "MESSAGE_TOO_LARGE: refused"}}); err != nil {
		t.Fatal(err)
	}
	out = d.cli(t, 0, "dlq", "list", "--parked")
	if !strings.Contains(out, "usage.dlq") || !strings.Contains(out, "message_too_large") || !strings.Contains(out, "usage/0@7") {
		t.Errorf("dlq list --parked: %s", out)
	}
	var ps []inspect.ParkedMessage
	if err := json.Unmarshal([]byte(d.cli(t, 0, "dlq", "list", "--parked", "--json")), &ps); err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != pending[0].ID || ps[0].Reason != "message_too_large" {
		t.Errorf("dlq list --parked --json: %+v", ps)
	}
	out = d.cli(t, exitMismatch, "reconcile", "--outbox-grace", "1ns")
	if !strings.Contains(out, reconcile.ClassOutboxParked) || strings.Contains(out, reconcile.ClassOutboxUnpublished) {
		t.Errorf("reconcile:\n%s", out)
	}
}
