-- The identities of one tenant and period ($1, $2), with whether they wrote
-- ledger rows and whether their settlement's outbox row on the settlements
-- topic ($3) is marked published, and the per-account sequence its
-- response carries (0: none).
WITH published AS (
    SELECT DISTINCT convert_from(value, 'UTF8')::jsonb ->> 'settlement_id' AS sid
      FROM outbox_messages
     WHERE topic = $3 AND published
)
SELECT i.id, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, ''),
       i.topic, i.partition, i."offset",
       EXISTS (SELECT 1 FROM ledger_entries l WHERE l.identity_id = i.id),
       coalesce(i.settlement_id IN (SELECT sid FROM published), false),
       coalesce((i.response ->> 'sequence')::bigint, 0)
  FROM identities i
 WHERE i.tenant_id = $1 AND i.account_period = $2
 ORDER BY i.id
