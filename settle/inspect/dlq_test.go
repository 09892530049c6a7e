package inspect_test

import (
	"context"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestLastReplays: where each letter of a list was last sent back to, in
// the list's order and in one query: the newest of a letter's two
// replays, nil for a letter never replayed, and a letter of another
// tenant kept apart from one with the same id's replays.
func TestLastReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	var ids [3]int64
	for i, tenant := range []string{"acme", "acme", "globex"} {
		if err := pool.QueryRow(ctx, `INSERT INTO dead_letters (tenant_id, topic, partition, "offset", value, reason, error_class, error, attempts)
			VALUES ($1, 'usage', 0, $2, '\x7b7d', 'invalid', 'validation', 'bad', 1) RETURNING id`, tenant, i).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO dead_letter_replays (tenant_id, dead_letter_id, topic, partition, "offset", at) VALUES
		('acme', $1, 'usage', 1, 10, now() - interval '1 hour'), ('acme', $1, 'usage', 2, 20, now()),
		('globex', $2, 'usage', 3, 30, now())`, ids[0], ids[2]); err != nil {
		t.Fatal(err)
	}
	ds := []inspect.DeadLetter{{ID: ids[2], TenantID: "globex"}, {ID: ids[1], TenantID: "acme"}, {ID: ids[0], TenantID: "acme"}, {ID: ids[2], TenantID: "acme"}}
	got, err := inspect.New(s).LastReplays(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	want := []*message.Coordinates{{Topic: "usage", Partition: 3, Offset: 30}, nil, {Topic: "usage", Partition: 2, Offset: 20}, nil}
	if len(got) != len(want) {
		t.Fatalf("%d answers for %d letters", len(got), len(want))
	}
	for i := range want {
		if (got[i] == nil) != (want[i] == nil) || got[i] != nil && *got[i] != *want[i] {
			t.Errorf("letter %d of %s: last replay %v, want %v", ds[i].ID, ds[i].TenantID, got[i], want[i])
		}
	}
}
