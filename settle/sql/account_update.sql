-- name: AccountUpdate :exec
-- Moves the cached balances by the sums of the batch's rows. The seq guard
-- asserts that nobody changed the account since this transaction locked it:
-- the statement fails unless it updated every account it names
-- (settle_guard, migration 0011).
WITH u AS (
    UPDATE accounts a
       SET balance = a.balance + k.balance_delta, held = a.held + k.held_delta,
           seq = k.seq_after, chain_head = k.chain_head, updated_at = now()
      FROM unnest(@id::bigint[], (@balance_delta::text[])::numeric[], (@held_delta::text[])::numeric[], @seq_before::bigint[], @seq_after::bigint[], @chain_head::bytea[])
           AS k (id, balance_delta, held_delta, seq_before, seq_after, chain_head)
     WHERE a.id = k.id AND a.seq = k.seq_before
 RETURNING 1
)
SELECT settle_guard('account_update', (SELECT count(*) FROM u), cardinality(@id::bigint[]));
