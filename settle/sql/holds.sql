-- name: HoldDue :many
-- Active holds past their expiry, a page at a time, with their accounts.
SELECT h.identity_id, h.account_id
  FROM holds h
 WHERE h.status = 'active' AND h.expires_at <= now()
 ORDER BY h.expires_at
 LIMIT @max_rows::integer;

-- name: HoldInsert :exec
-- The holds a batch opened; expires_at as text, '' for a hold that never expires.
INSERT INTO holds (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by)
SELECT k.identity_id, k.tenant_id, k.account_id, k.amount, k.remaining, nullif(k.expires_at, '')::timestamptz, k.status, nullif(k.closed_by, 0)
  FROM unnest(@identity_id::bigint[], @tenant_id::text[], @account_id::bigint[], (@amount::text[])::numeric[], (@remaining::text[])::numeric[], @expires_at_text::text[],
              @status::text[], @closed_by::bigint[])
       AS k (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by);

-- name: HoldLock :batchmany
-- Locks holds by their identity, or the active holds of some accounts
-- that have expired by now, and reads their state with their identity,
-- probed in a lateral subquery of its own (see chain_lock.sql).
SELECT h.identity_id, h.tenant_id, h.account_id, h.amount::text AS amount, h.remaining::text AS remaining, h.expires_at, h.status,
       coalesce(h.closed_by, 0), h.rev, i.account_period, i.record_id, coalesce(i.settlement_id, '')
  FROM holds h
 CROSS JOIN LATERAL (SELECT i.account_period, i.record_id, i.settlement_id
                       FROM identities i
                      WHERE i.id = h.identity_id AND i.tenant_id = h.tenant_id LIMIT 1) i
 WHERE h.identity_id IN (SELECT unnest(@identity_ids::bigint[])
                          UNION
                          SELECT x.identity_id
                            FROM holds x
                           WHERE x.account_id = ANY (@expiring_account_ids::bigint[]) AND x.status = 'active' AND x.expires_at <= now())
 ORDER BY h.identity_id
   FOR UPDATE OF h;

-- name: HoldUpdate :exec
-- Writes the holds a batch changed, guarded on the revision it read: the
-- statement fails unless it updated every hold it names (settle_guard).
WITH u AS (
    UPDATE holds h
       SET remaining = k.remaining, status = k.status, closed_by = nullif(k.closed_by, 0), rev = h.rev + 1
      FROM unnest(@identity_id::bigint[], (@remaining::text[])::numeric[], @status::text[], @closed_by::bigint[], @rev::integer[])
           AS k (identity_id, remaining, status, closed_by, rev)
     WHERE h.identity_id = k.identity_id AND h.rev = k.rev
 RETURNING 1
)
SELECT settle_guard('hold_update', (SELECT count(*) FROM u), cardinality(@identity_id::bigint[]));
