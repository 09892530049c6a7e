package db_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/settletest"
)

// TestCopyWritesAsPgx: the identities and ledger entries a settling
// transaction copies (its own binary encoding, pgq.Tx) are the rows pgx's
// CopyFrom writes from the same parameters (the pool's), column by column:
// every column holds a value of its own, NULLs and empty values included,
// so that two columns swapped or one encoded as another's type show, and
// numerics compared as text (their display scale). Seen failing with the
// identity's fingerprint and offset swapped, with the timestamps a
// microsecond off, with the numerics' display scale left at 0 and with
// their trailing zero digits weighed wrong.
func TestCopyWritesAsPgx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	num := func(v int64, exp int32) pgtype.Numeric {
		return pgtype.Numeric{Int: big.NewInt(v), Exp: exp, Valid: true}
	}
	at := time.Date(2026, 7, 14, 12, 0, 0, 123456789, time.UTC)
	identities := func(set int64) []db.IdentityCopyParams {
		var rows []db.IdentityCopyParams
		for i := int64(1); i <= 3; i++ {
			r := db.IdentityCopyParams{
				ID: set*100 + i, TenantID: "t-1", AccountPeriod: "2026-07", RecordID: fmt.Sprintf("r-%d-%d", set, i),
				Operation: "usage", Fingerprint: -7 * i, CanonicalVersion: 3, Canonical: []byte{0, 1, 0xff, byte(i)},
				Outcome: "settled", Reason: "", Response: []byte(`{"version":1,"n":` + fmt.Sprint(i) + `}`),
				SettlementID: str(fmt.Sprint("s-", i)), AccountID: i64(40 + i), RootID: i64(50 + i), Source: "src",
				Attributes: []byte(`{"région": "é"}`), Topic: "usage", Partition: 5, Offset: 1_000_000 + i,
				FirstSeenAt: at.Add(-time.Duration(i) * time.Hour), LastAttemptedAt: at.Add(time.Duration(i) * time.Microsecond),
				Attempts: 2, Subject: "s-1", Currency: "EUR", TargetID: i64(60 + i),
			}
			if i == 2 { // the nullable columns NULL, the optional ones empty
				r.SettlementID, r.AccountID, r.RootID, r.TargetID, r.Attributes = nil, nil, nil, nil, nil
				r.Outcome, r.Reason, r.Canonical, r.Source = "refused", "insufficient_funds", []byte{}, ""
			}
			rows = append(rows, r)
		}
		return rows
	}
	ledger := func(set int64) []db.LedgerEntryCopyParams {
		return []db.LedgerEntryCopyParams{
			{ID: 1, IdentityID: set*100 + 1, AccountID: set, TenantID: "t-1", Bucket: "balance", Amount: num(-12345, -4),
				ChainHash: []byte{9, 8, 7}, Seq: i64(1), BalanceAfter: num(987654321987654321, -9), HeldAfter: num(0, 0)},
			{ID: 2, IdentityID: set*100 + 3, AccountID: set, TenantID: "t-1", Bucket: "held", Amount: num(5, 3),
				ChainHash: nil, Seq: nil, BalanceAfter: pgtype.Numeric{}, HeldAfter: num(1, -2)},
			// zeros with decimals, trailing zero digits, the extremes of
			// 64 bits, exponents of every remainder mod 4
			{ID: 3, IdentityID: set*100 + 3, AccountID: set, TenantID: "t-1", Bucket: "balance", Amount: num(0, -4),
				BalanceAfter: num(10000, -4), HeldAfter: num(0, 0)},
			{ID: 4, IdentityID: set*100 + 3, AccountID: set, TenantID: "t-1", Bucket: "balance", Amount: num(math.MinInt64, -7),
				BalanceAfter: num(math.MaxInt64, 2), HeldAfter: num(120000000, -1)},
			{ID: 5, IdentityID: set*100 + 3, AccountID: set, TenantID: "t-1", Bucket: "balance", Amount: num(-1, -33),
				BalanceAfter: num(900000001, -5), HeldAfter: num(7, 1)},
			{ID: 6, IdentityID: set*100 + 3, AccountID: set, TenantID: "t-1", Bucket: "balance", Amount: num(-99990000, 0),
				BalanceAfter: pgtype.Numeric{Int: new(big.Int).Lsh(big.NewInt(1), 80), Exp: -3, Valid: true}, HeldAfter: num(10, -6)},
		}
	}
	// Set 1 by pgx's CopyFrom (a pool is not a pgq.Tx), set 2 by the
	// transaction's own encoding.
	if _, err := db.New(pool).IdentityCopy(ctx, identities(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(pool).LedgerEntryCopy(ctx, ledger(1)); err != nil {
		t.Fatal(err)
	}
	tx, err := pgq.Begin(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if n, err := db.New(tx).IdentityCopy(ctx, identities(2)); err != nil || n != 3 {
		t.Fatalf("copied %d identities: %v", n, err)
	}
	if n, err := db.New(tx).LedgerEntryCopy(ctx, ledger(2)); err != nil || n != 6 {
		t.Fatalf("copied %d ledger entries: %v", n, err)
	}
	if _, err := tx.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT count(*), count(*) FILTER (WHERE a.r IS NOT DISTINCT FROM b.r)
		   FROM (SELECT id % 100 AS n, to_jsonb(i) - 'id' - 'record_id' - 'committed_at' AS r FROM identities i WHERE id < 200) a
		   FULL JOIN (SELECT id % 100 AS n, to_jsonb(i) - 'id' - 'record_id' - 'committed_at' AS r FROM identities i WHERE id > 200) b USING (n)`,
		`SELECT count(*), count(*) FILTER (WHERE a.r IS NOT DISTINCT FROM b.r)
		   FROM (SELECT id AS n, ROW(id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)::text AS r
		           FROM ledger_entries WHERE account_id = 1) a
		   FULL JOIN (SELECT id AS n, ROW(id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)::text AS r
		           FROM ledger_entries WHERE account_id = 2) b USING (n)`,
	} {
		var rows, same int
		if err := pool.QueryRow(ctx, q).Scan(&rows, &same); err != nil {
			t.Fatal(err)
		}
		if rows == 0 || same != rows {
			t.Errorf("%d of %d rows the same as pgx's CopyFrom wrote:\n%s", same, rows, q)
		}
	}
	var first, last time.Time
	if err := pool.QueryRow(ctx, "SELECT first_seen_at, last_attempted_at FROM identities WHERE id = 201").Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if want := at.Add(-time.Hour).Truncate(time.Microsecond); !first.Equal(want) {
		t.Errorf("first_seen_at %v, want %v", first, want)
	}
	if want := at.Add(time.Microsecond).Truncate(time.Microsecond); !last.Equal(want) {
		t.Errorf("last_attempted_at %v, want %v", last, want)
	}
}
