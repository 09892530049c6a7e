package ingest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/internal/jsontest"
	"github.com/settlehq/settle/settle/message"
)

// TestRecordResultAppendJSON: an answer's append-style encoding gives the
// bytes encoding/json gives, for single records and batches, over random
// results whose strings hold everything it escapes (HTML characters,
// control characters, invalid UTF-8, U+2028) and whose stored responses are
// what the service writes (message.Response.AppendJSON); and it quotes,
// in order and at their bytes, the responses that are identities'.
// An answer's reason quoted by strconv fails it.
func TestRecordResultAppendJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	str := func() string { return jsontest.String(rng) }
	result := func(i int) RecordResult {
		r := RecordResult{Index: i, Identity: message.IdentityJSON{TenantID: str(), AccountPeriod: str(), RecordID: str(), Operation: str()},
			Outcome: message.Outcome(str()), Reason: str(), Replayed: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			r.CaseID = rng.Int64N(1<<40) - 1<<39
		}
		if rng.IntN(4) > 0 {
			resp := message.Response{Version: 1, Outcome: message.Outcome(str()), Reason: str(), SettlementID: str(),
				Identity: r.Identity, Kind: str(), Subject: str(), Currency: str(), BalanceAfter: str(), Sequence: rng.Int64N(1000),
				CommittedAt: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(), Links: &message.Links{Corrects: str()}}
			r.Response = resp.AppendJSON(nil)
			if rng.IntN(2) == 0 {
				r.responseOf = rng.Int64N(1<<40) + 1
			}
		}
		return r
	}
	// checkQuotes: quotes name, in order, the results' identities whose
	// responses they are, at those responses' bytes in body.
	checkQuotes := func(trial int, body []byte, quotes []idempotency.Quote, results ...RecordResult) {
		t.Helper()
		n := 0
		for _, r := range results {
			if r.responseOf == 0 {
				continue
			}
			if n >= len(quotes) {
				t.Fatalf("trial %d: %d quotes, identity %d's response not quoted", trial, len(quotes), r.responseOf)
			}
			q := quotes[n]
			if q.IdentityID != r.responseOf || q.At < 0 || q.At+q.Len > len(body) || !bytes.Equal(body[q.At:q.At+q.Len], r.Response) {
				t.Fatalf("trial %d: quote %d %+v does not hold identity %d's response", trial, n, q, r.responseOf)
			}
			n++
		}
		if n != len(quotes) {
			t.Fatalf("trial %d: %d quotes for %d quoted responses", trial, len(quotes), n)
		}
	}
	for trial := range 2000 {
		one := result(trial)
		want, err := json.Marshal(one)
		if err != nil {
			t.Fatal(err)
		}
		got, quotes := one.appendJSON(nil, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d, one record:\n got %s\nwant %s", trial, got, want)
		}
		checkQuotes(trial, got, quotes, one)
		batch := BatchResponse{}
		if rng.IntN(8) > 0 {
			batch.Results = []RecordResult{}
			for i := range rng.IntN(4) {
				batch.Results = append(batch.Results, result(i))
			}
		}
		if want, err = json.Marshal(batch); err != nil {
			t.Fatal(err)
		}
		got, quotes = batch.appendJSON(nil, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d, a batch:\n got %s\nwant %s", trial, got, want)
		}
		checkQuotes(trial, got, quotes, batch.Results...)
	}
}

// BenchmarkAnswer: an answer of one record with its stored response, by
// hand (append) and by encoding/json (marshal):
// go test -run X -bench Answer ./edge/ingest
func BenchmarkAnswer(b *testing.B) {
	id := message.IdentityJSON{TenantID: "t-1", AccountPeriod: "2026-07", RecordID: "u-s-1234-56789", Operation: "usage"}
	resp := message.Response{Version: 1, Outcome: "settled", SettlementID: "stl_0a2335faed", Identity: id, Kind: "usage",
		Subject: "cust-42", Currency: "USD", Entries: []message.Entry{{Bucket: "balance", Amount: "-12.50"}},
		BalanceAfter: "87.50", Sequence: 17, ChainHash: strings.Repeat("ab", 32), CommittedAt: time.Unix(1.8e9, 5).UTC()}
	r := RecordResult{Identity: id, Outcome: "settled", Response: resp.AppendJSON(nil)}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			_, _ = r.appendJSON(make([]byte, 0, 256+len(r.Response)), nil)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
