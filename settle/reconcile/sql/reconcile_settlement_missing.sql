-- name: ReconcileSettlementMissing :many
-- Settled identities that wrote ledger rows but have no outbox row on the
-- settlements topic, and settlement ids with more than one outbox row
-- (tenant_id, '' = all; settlements_topic). A settlement committed before
-- the last settle prune may have had its published row removed: none is
-- then not a finding.
--
-- A settlement's row names its identity, whose settlement_id is the one
-- its message (the identity's stored response) carries: only the other
-- rows on the topic have their message parsed. The messages are read and
-- counted by settlement id once (MATERIALIZED):
-- on a database whose statistics are not yet gathered, a plan that joined
-- them row by row re-parsed every message for every identity (hours for a
-- few thousand of each).
WITH o AS MATERIALIZED (
    SELECT coalesce(settlement_id, convert_from(value, 'UTF8')::jsonb ->> 'settlement_id') AS sid, count(*) AS n
      FROM outbox_messages
     WHERE topic = @settlements_topic::text
       AND (@tenant_id::text = '' OR tenant_id = @tenant_id)
     GROUP BY 1
)
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       coalesce(i.settlement_id, '') AS settlement_id, coalesce(max(o.n), 0)::bigint AS outbox_rows
  FROM identities i
  LEFT JOIN o ON o.sid = i.settlement_id
 WHERE i.outcome = 'settled'
   AND (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
   AND EXISTS (SELECT 1 FROM ledger_entries l WHERE l.identity_id = i.id)
 GROUP BY i.tenant_id, i.id
HAVING coalesce(max(o.n), 0) > 1
    OR (coalesce(max(o.n), 0) = 0 AND i.committed_at >= coalesce((SELECT max(p.at) FROM prune_runs p), '-infinity'))
 ORDER BY i.id;
