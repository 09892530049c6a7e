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
