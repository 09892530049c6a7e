package message_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/jsontest"
	"github.com/settlehq/settle/settle/message"
)

// TestResponseAppendJSON: the append-style encoders give the bytes
// encoding/json gives, over random responses and results whose strings
// hold everything it escapes (HTML characters, control characters, invalid
// UTF-8, U+2028).
func TestResponseAppendJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	str := func() string { return jsontest.String(rng) }
	num := func() int64 {
		if rng.IntN(3) == 0 {
			return 0
		}
		return rng.Int64N(1<<40) - 1<<39
	}
	when := func() time.Time {
		zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
		return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))])
	}
	for trial := range 2000 {
		r := message.Response{Version: int(num()), Outcome: message.Outcome(str()), Reason: str(), Detail: str(),
			SettlementID: str(), Identity: message.IdentityJSON{TenantID: str(), AccountPeriod: str(), RecordID: str(), Operation: str()},
			Kind: str(), Subject: str(), Currency: str(), BalanceAfter: str(), HeldAfter: str(), Sequence: num(),
			ChainHash: str(), CaseID: num(), CommittedAt: when(), Late: rng.IntN(2) == 0}
		for range rng.IntN(3) {
			r.Entries = append(r.Entries, message.Entry{Bucket: str(), Amount: str()})
		}
		if rng.IntN(3) == 0 {
			r.Entries = []message.Entry{} // empty, not nil: omitted too
		}
		if rng.IntN(2) == 0 {
			r.Links = &message.Links{Corrects: str(), Root: str(), RefundTarget: str(), Hold: str(), Case: num()}
		}
		if rng.IntN(2) == 0 {
			o := when()
			r.OccurredAt = &o
		}
		if rng.IntN(2) == 0 {
			r.SourceRecord = &message.Coordinates{Topic: str(), Partition: int32(num()), Offset: num()}
		}
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("trial %d: Response.AppendJSON\n got %s\nwant %s", trial, got, want)
		}

		res := message.Result{Version: int(num()), Source: message.Coordinates{Topic: str(), Partition: int32(num()), Offset: num()},
			Outcome: message.Outcome(str()), Reason: str(), Error: str(), CaseID: num(), Replayed: rng.IntN(2) == 0,
			Redelivered: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			res.Identity = &r.Identity
		}
		if rng.IntN(2) == 0 {
			res.Response = want
		}
		wantRes, err := json.Marshal(&res)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(wantRes) {
			t.Fatalf("trial %d: Result.AppendJSON\n got %s\nwant prefix%s", trial, got, wantRes)
		}
	}
}
