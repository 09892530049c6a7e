package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/idempotency"
	"github.com/settlehq/settle/settle/settletest"
)

func request(key, body string, lease time.Duration) idempotency.Request {
	return idempotency.Request{TenantID: "acme", Key: key, RequestHash: []byte("sha:" + body),
		Canonicals: [][]byte{[]byte(body)}, Lease: lease}
}

// A write of an attempt that does not own its key changes nothing and says
// so: dberr.ErrClaimLost naming the key and the attempt. The owner's
// answer, stored in the same round trip as the next group's claims and
// ahead of them, is what a repeat of the key is answered. A claim whose
// lease ran out is taken over, and the attempt that held it can no longer
// complete it.
func TestFencedWritesNameTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	keys := idempotency.New(s)

	c, err := keys.Claim(ctx, request("k-1", "a", time.Minute))
	if err != nil || c.State != idempotency.ClaimAcquired || c.KeyID == 0 || c.Attempts != 1 || c.TakenOver {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if b, err := keys.Claim(ctx, request("k-1", "a", time.Minute)); err != nil || b.State != idempotency.ClaimBusy || b.RetryAfter <= 0 {
		t.Fatalf("claim of a held key: %+v %v, want busy", b, err)
	}
	if m, err := keys.Claim(ctx, request("k-1", "b", time.Minute)); err != nil || m.State != idempotency.ClaimMismatch ||
		len(m.StoredCanonicals) != 1 || string(m.StoredCanonicals[0]) != "a" {
		t.Fatalf("claim for another body: %+v %v, want a mismatch with the stored records", m, err)
	}

	const stranger = "00000000-0000-0000-0000-000000000000"
	noun := fmt.Sprintf("idempotency key %d attempt %s", c.KeyID, stranger)
	for name, err := range map[string]error{
		"complete": keys.Complete(ctx, c.KeyID, stranger, 200, []byte("late")),
		"release":  keys.Release(ctx, c.KeyID, stranger),
	} {
		if !errors.Is(err, dberr.ErrClaimLost) || !strings.Contains(err.Error(), noun) {
			t.Errorf("%s by an attempt that does not own the key: %v, want ErrClaimLost naming %q", name, err, noun)
		}
	}
	lost, err := keys.CompleteMany(ctx, []idempotency.Answer{{KeyID: c.KeyID, AttemptID: stranger, Status: 200, Response: []byte("late")}})
	if err != nil || len(lost) != 1 || !lost[0] {
		t.Fatalf("group answer of a stranger: lost %v %v, want [true]", lost, err)
	}
	if n, err := keys.ReleaseMany(ctx, []int64{c.KeyID}, []string{stranger}); err != nil || n != 0 {
		t.Fatalf("group release by a stranger released %d %v", n, err)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM idempotency_keys WHERE status = 'in_progress' AND lease_until > now() AND response IS NULL`); n != 1 {
		t.Fatal("a write of an attempt that does not own the key changed it")
	}

	// The owner's answer and a repeat of its key in one call: the answer
	// is stored first, so the repeat is its replay.
	lost, claims, err := keys.CompleteAndClaim(ctx,
		[]idempotency.Answer{{KeyID: c.KeyID, AttemptID: c.AttemptID, Status: 201, Response: []byte("first")}},
		[]idempotency.Request{request("k-1", "a", time.Minute), request("k-2", "z", time.Millisecond)})
	if err != nil || len(lost) != 1 || lost[0] || len(claims) != 2 {
		t.Fatalf("complete and claim: lost %v claims %+v %v", lost, claims, err)
	}
	if r := claims[0]; r.State != idempotency.ClaimReplay || r.KeyID != c.KeyID || r.ResponseStatus != 201 || string(r.Response) != "first" {
		t.Fatalf("repeat of a key answered in the same call: %+v, want its replay", r)
	}
	if err := keys.Complete(ctx, c.KeyID, c.AttemptID, 200, []byte("again")); !errors.Is(err, dberr.ErrClaimLost) {
		t.Fatalf("second answer of a done key: %v, want ErrClaimLost", err)
	}

	// k-2's lease (1 ms) runs out: the next claim takes it over.
	held := claims[1]
	if held.State != idempotency.ClaimAcquired {
		t.Fatalf("new key in a group: %+v", held)
	}
	time.Sleep(5 * time.Millisecond)
	took, err := keys.Claim(ctx, request("k-2", "z", time.Minute))
	if err != nil || took.State != idempotency.ClaimAcquired || !took.TakenOver || took.Attempts != 2 || took.KeyID != held.KeyID ||
		took.AttemptID == held.AttemptID {
		t.Fatalf("claim of an expired key: %+v %v, want a take-over", took, err)
	}
	if err := keys.Complete(ctx, held.KeyID, held.AttemptID, 200, []byte("stalled")); !errors.Is(err, dberr.ErrClaimLost) {
		t.Fatalf("answer of the attempt taken over: %v, want ErrClaimLost", err)
	}
	if err := keys.Complete(ctx, took.KeyID, took.AttemptID, 200, []byte("retry")); err != nil {
		t.Fatalf("answer of the attempt that took over: %v", err)
	}
}

// Requests that cannot be claimed are refused before any SQL runs, and a
// group is bounded.
func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := idempotency.New(settletest.NewStore(t, settle.Config{}))
	ok := request("k", "a", time.Second)
	for _, tc := range []struct {
		edit func(*idempotency.Request)
		want string
	}{
		{func(r *idempotency.Request) { r.TenantID = "" }, "no tenant"},
		{func(r *idempotency.Request) { r.Key = strings.Repeat("k", idempotency.KeyBytesMax+1) }, "must be 1 to 255 bytes"},
		{func(r *idempotency.Request) { r.RequestHash = nil }, "no request hash"},
		{func(r *idempotency.Request) { r.Canonicals = nil }, "no records"},
		{func(r *idempotency.Request) { r.Lease = time.Microsecond }, "lease 1µs is too short"},
	} {
		r := ok
		tc.edit(&r)
		if _, err := keys.Claim(ctx, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("claim of %+v: %v, want %q", r, err, tc.want)
		}
		if _, err := keys.ClaimMany(ctx, []idempotency.Request{ok, r}); err == nil || !strings.Contains(err.Error(), "request 1: ") {
			t.Errorf("group claim with %+v: %v, want request 1 named", r, err)
		}
	}
	many := make([]idempotency.Request, idempotency.GroupKeysMax+1)
	if _, err := keys.ClaimMany(ctx, many); err == nil || !strings.Contains(err.Error(), "at most 1024") {
		t.Errorf("group of %d: %v", len(many), err)
	}
	if _, err := keys.ReleaseMany(ctx, []int64{1}, nil); err == nil {
		t.Error("release of 1 id with 0 attempts was not refused")
	}
}
