package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/verify"
)

// TestVerifyCommand: `settle verify` prints the totals and the digest and
// exits 0 on a clean topic, writes the heads with --heads-out, continues
// from them with --from-heads (reading only what follows), and exits 3
// naming the account and sequence of a gap. settle/verify's own tests
// cover what it finds on the topic of a settled month.
func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	var head []byte
	settlement := func(seq int64, amount string) *kgo.Record {
		sid := "s-" + amount + "-" + string(rune('a'+seq))
		head = message.ChainHash(head, "acme", "cust-1", "USD", sid, "balance", amount)
		v, _ := json.Marshal(message.Response{Version: 1, Outcome: message.OutcomeSettled, SettlementID: sid,
			Identity: message.IdentityJSON{TenantID: "acme", AccountPeriod: "2026-11", RecordID: sid, Operation: "grant"},
			Kind:     "grant", Subject: "cust-1", Currency: "USD", Entries: []message.Entry{{Bucket: "balance", Amount: amount}},
			Sequence: seq, ChainHash: hex.EncodeToString(head)})
		return &kgo.Record{Topic: "settlements", Key: []byte("acme/cust-1/USD"), Value: v}
	}
	k.Produce(t, settlement(1, "100"), settlement(2, "-2.5"))
	heads := filepath.Join(t.TempDir(), "heads.json")

	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"verify", "--brokers", k.Brokers[0], "--period", "2026-11", "--heads-out", heads}, &out, &errs); code != exitOK {
		t.Fatalf("verify: exit %d\n%s%s", code, out.String(), errs.String())
	}
	for _, s := range []string{"acme    2026-11  USD       2            97.5", "digest ", "no findings"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output does not say %q:\n%s", s, out.String())
		}
	}
	b, err := os.ReadFile(heads)
	if err != nil {
		t.Fatal(err)
	}
	var h verify.Heads
	if err := json.Unmarshal(b, &h); err != nil || len(h.Heads) != 1 || h.Heads[0].Sequence != 2 || !strings.Contains(out.String(), "digest "+h.Digest) {
		t.Fatalf("heads file %s (%v), want account cust-1 at sequence 2 and the printed digest", b, err)
	}

	k.Produce(t, settlement(3, "1"))
	out.Reset()
	if code := run(context.Background(), []string{"verify", "--brokers", k.Brokers[0], "--from-heads", heads, "--json"}, &out, &errs); code != exitOK {
		t.Fatalf("verify --from-heads: exit %d\n%s%s", code, out.String(), errs.String())
	}
	var rep verify.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Checked != 1 || rep.FromDigest != h.Digest {
		t.Fatalf("verify --from-heads --json: %s (%v), want the one message after the heads checked", out.String(), err)
	}

	settlement(4, "1") // never published
	k.Produce(t, settlement(5, "1"))
	out.Reset()
	if code := run(context.Background(), []string{"verify", "--brokers", k.Brokers[0], "--from-heads", heads}, &out, &errs); code != exitMismatch {
		t.Fatalf("verify over a gap: exit %d, want 3\n%s%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "sequence_gap  acme    cust-1   USD       5") {
		t.Errorf("output does not name the gap before sequence 5 of acme/cust-1:\n%s", out.String())
	}
}
