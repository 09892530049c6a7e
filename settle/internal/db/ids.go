package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// IDBlock is the step of the two sequences that hand out ids by the
// block, the identities' (migration 0003) and the outbox's (migration
// 0015): one nextval v reserves v .. v+IDBlock-1, so a batch draws one
// nextval per thousand ids instead of one per id (identity_reserve.sql,
// outbox_settlements_insert.sql). CheckIDBlocks refuses a database whose
// sequences step otherwise.
const IDBlock = 1000

// Blocks is how many blocks n ids take.
func Blocks(n int) int32 { return int32((n + IDBlock - 1) / IDBlock) }

// Reserved appends to ids the first n ids of the blocks that start at
// starts, in order.
func Reserved(ids, starts []int64, n int) []int64 {
	for _, v := range starts {
		for i := int64(0); i < IDBlock && n > 0; i, n = i+1, n-1 {
			ids = append(ids, v+i)
		}
	}
	return ids
}

// CheckIDBlocks returns an error unless both sequences that hand out ids
// by the block step by IDBlock: with a smaller step, two transactions
// would take the same ids.
func CheckIDBlocks(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	var identities, outbox int64
	err := q.QueryRow(ctx, `SELECT (SELECT seqincrement FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence('identities', 'id')::regclass),
	       (SELECT seqincrement FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence('public.outbox', 'id')::regclass)`).Scan(&identities, &outbox)
	if err != nil {
		return fmt.Errorf("read the id sequences' steps: %w", err)
	}
	if identities != IDBlock || outbox != IDBlock {
		return fmt.Errorf("the id sequences step by %d (identities) and %d (outbox), not %d as the schema sets them: "+
			"restore it with ALTER TABLE identities ALTER COLUMN id SET INCREMENT BY %d (and the same for outbox)",
			identities, outbox, IDBlock, IDBlock)
	}
	return nil
}
