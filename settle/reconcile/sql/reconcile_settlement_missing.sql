-- Settled identities that wrote ledger rows but have no outbox row on the
-- settlements topic, and settlement ids with more than one outbox row
-- ($1: tenant, '' = all; $2: settlements topic). A settlement committed
-- before the last settle prune may have had its published row removed:
-- none is then not a finding.
WITH o AS (
    SELECT convert_from(value, 'UTF8')::jsonb ->> 'settlement_id' AS sid
      FROM outbox_messages
     WHERE topic = $2
)
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       coalesce(i.settlement_id, ''), count(o.sid)
  FROM identities i
  LEFT JOIN o ON o.sid = i.settlement_id
 WHERE i.outcome = 'settled'
   AND ($1 = '' OR i.tenant_id = $1)
   AND EXISTS (SELECT 1 FROM ledger_entries l WHERE l.identity_id = i.id)
 GROUP BY i.tenant_id, i.id
HAVING count(o.sid) > 1
    OR (count(o.sid) = 0 AND i.committed_at >= coalesce((SELECT max(p.at) FROM prune_runs p), '-infinity'))
 ORDER BY i.id
