package reconcile_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/schema"
	"github.com/settlehq/settle/settle/settletest"
)

// TestUpgradeKeepsAccountState: a database settled at schema 15 (accounts
// with their cached state, ledger rows without any) migrated to 16 shows
// every account's balance, held, sequence and head as the cache had them,
// reconciles clean, and the next settlement continues each account's
// sequence and chain. Schema 15 is made by undoing migrations 18, 17 and
// 16 on the reconcile fixture (grants, a usage, a hold and its capture, a
// correction, a refund, on two accounts), plain and partitioned by
// tenant. Seen failing with the backfill taken out of the migration (every
// balance read 0).
func TestUpgradeKeepsAccountState(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { t.Parallel(); upgradeKeepsAccountState(t, settletest.NewDatabase(t)) })
	t.Run("partitioned", func(t *testing.T) { t.Parallel(); upgradeKeepsAccountState(t, settletest.NewPartitionedDatabase(t)) })
}

func upgradeKeepsAccountState(t *testing.T, url string) {
	ctx := context.Background()
	s := settletest.NewStoreOn(t, url, settle.Config{})
	source, published := fixtureOn(t, s)
	type state struct {
		Balance, Held string
		Seq           int64
		Head          []byte
	}
	read := func() map[string]state {
		rows, err := s.Pool().Query(ctx, `SELECT subject, balance::text, held::text, seq, chain_head FROM account_states`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]state{}
		for rows.Next() {
			var subject string
			var st state
			if err := rows.Scan(&subject, &st.Balance, &st.Held, &st.Seq, &st.Head); err != nil {
				t.Fatal(err)
			}
			out[subject] = st
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := read()
	settletest.Bypass(t, s.Pool(), `
		ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_case_id_fkey;
		ALTER TABLE conflict_cases DROP CONSTRAINT conflict_cases_pkey, ADD CONSTRAINT conflict_cases_pkey PRIMARY KEY (tenant_id, id);
		CREATE INDEX conflict_cases_id ON conflict_cases (id);
		ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_pkey, ADD CONSTRAINT case_resolutions_pkey PRIMARY KEY (tenant_id, id),
		                             ADD CONSTRAINT case_resolutions_case_id_fkey FOREIGN KEY (tenant_id, case_id) REFERENCES conflict_cases (tenant_id, id);
		ALTER TABLE accounts ADD COLUMN balance numeric NOT NULL DEFAULT 0, ADD COLUMN held numeric NOT NULL DEFAULT 0,
		                     ADD COLUMN seq bigint NOT NULL DEFAULT 0, ADD COLUMN chain_head bytea NOT NULL DEFAULT '',
		                     ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
		UPDATE accounts a SET balance = x.balance, held = x.held, seq = x.seq, chain_head = x.chain_head
		  FROM account_states x WHERE x.id = a.id;
		DROP VIEW account_states;
		DROP FUNCTION settle_kept(text[], bigint[], bigint[], boolean[]);
		ALTER TABLE ledger_entries DROP COLUMN seq, DROP COLUMN balance_after, DROP COLUMN held_after;
		ALTER TABLE ledger_entries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH 1000);
		GRANT UPDATE (balance, held, seq, chain_head, updated_at) ON accounts TO settle_app;
		DELETE FROM schema_migrations WHERE version IN (16, 17, 18)`)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if applied, err := schema.Migrate(ctx, conn); err != nil || len(applied) != 3 || applied[0] != 16 || applied[2] != 18 {
		t.Fatalf("migrate: applied %v, %v; want [16 17 18]", applied, err)
	}
	// The migration rewrote ledger rows with their append-only trigger
	// disabled; it is back on every partition.
	if _, err := conn.Exec(ctx, `UPDATE ledger_entries SET amount = amount`); err == nil {
		t.Errorf("ledger rows updated after the migration: want them append-only again")
	}
	after := read()
	if len(after) != 2 || len(before) != 2 {
		t.Fatalf("accounts before %v, after %v; want two", before, after)
	}
	for subject, b := range before {
		a := after[subject]
		if a.Balance != b.Balance || a.Held != b.Held || a.Seq != b.Seq || string(a.Head) != string(b.Head) {
			t.Errorf("%s after the migration: %+v, want %+v", subject, a, b)
		}
	}
	if r := runReconcile(t, s, full(source, published)); !r.Clean() {
		t.Errorf("reconcile after the migration: %+v", r.Findings)
	}
	rs := settletest.MustSettle(t, s, settletest.Batch(0, int64(len(source)), settletest.Rec("record_id", "u-3", "subject", "cust-2", "amount", "1")))
	var resp message.Response
	if err := json.Unmarshal(rs[0].Response, &resp); err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != message.OutcomeSettled || resp.Sequence != before["cust-2"].Seq+1 || resp.BalanceAfter != "4" {
		t.Errorf("next settlement of cust-2: %s, want sequence %d and balance 4", rs[0].Response, before["cust-2"].Seq+1)
	}
	settletest.CheckInvariants(t, s.Pool())
}
