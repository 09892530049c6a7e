package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle/message"
)

// TestRecordIDsAreOpaqueBytes: record ids that differ only by Unicode
// normalisation ("café" in NFC, and with a combining accent in NFD) are
// two identities: both settle, as two charges, as docs/CONTRACT.md says.
// `settle produce` publishes both and warns, naming the line, the field
// and its NFC form, about the one not in NFC (exit 0: a warning, not a
// refusal).
func TestRecordIDsAreOpaqueBytes(t *testing.T) {
	t.Parallel()
	const nfc, nfd = "caf\u00e9-1", "cafe\u0301-1"
	d := newAnalystDB(t)
	grant := []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD","occurred_at":"2026-11-03T10:00:00Z"}`)
	rs := d.settle(t, message.Input{Topic: "usage", Offset: 0, Value: grant},
		message.Input{Topic: "usage", Offset: 1, Value: usageRecord("acme", nfc, "cust-1", "40")},
		message.Input{Topic: "usage", Offset: 2, Value: usageRecord("acme", nfd, "cust-1", "40")})
	var ids []string
	for i, r := range rs[1:] {
		var resp message.Response
		_ = json.Unmarshal(r.Response, &resp)
		if r.Outcome != message.OutcomeSettled || r.Replayed || resp.SettlementID == "" {
			t.Errorf("record %d (%q): %s, replayed %v, want settled anew: the two spellings are two identities", i+1, []string{nfc, nfd}[i], r.Outcome, r.Replayed)
		}
		ids = append(ids, resp.SettlementID)
	}
	if len(ids) == 2 && ids[0] == ids[1] {
		t.Errorf("one settlement %s for both spellings", ids[0])
	}

	k := kafkatest.NewCluster(t, 1)
	file := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(file, []byte(string(usageRecord("acme", nfc, "cust-1", "1"))+"\n"+string(usageRecord("acme", nfd, "cust-1", "1"))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"produce", "--brokers", k.Brokers[0], file}, &stdout, &stderr)
	if code != exitOK || !strings.Contains(stdout.String(), "published 2 records") {
		t.Errorf("produce: exit %d, want 0 and both published:\n%s%s", code, stdout.String(), stderr.String())
	}
	want := `line 2: warning: record_id "cafe\u0301-1" is not in Unicode NFC (its NFC form is "caf\u00e9-1")`
	if !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "line 1:") {
		t.Errorf("stderr:\n%s\nwant only line 2 warned: %s", stderr.String(), want)
	}
	if got := len(k.Read(t, "usage", 2, 5*time.Second)); got != 2 {
		t.Errorf("topic holds %d records, want both spellings", got)
	}
}
