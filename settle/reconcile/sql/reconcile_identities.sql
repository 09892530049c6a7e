-- name: ReconcileIdentities :many
-- The identities of one tenant and period (tenant_id, period), with
-- whether they wrote ledger rows and whether their settlement's outbox row
-- on the settlements topic (settlements_topic) is marked published, and
-- the per-account sequence its response carries (0: none).
WITH published AS (
    SELECT DISTINCT convert_from(value, 'UTF8')::jsonb ->> 'settlement_id' AS sid
      FROM outbox_messages
     WHERE topic = @settlements_topic::text AND published
)
SELECT i.id, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, '') AS settlement_id,
       i.topic, i.partition, i."offset",
       EXISTS (SELECT 1 FROM ledger_entries l WHERE l.identity_id = i.id) AS has_ledger,
       coalesce(i.settlement_id IN (SELECT sid FROM published), false)::boolean AS marked,
       coalesce((i.response ->> 'sequence')::bigint, 0)::bigint AS sequence
  FROM identities i
 WHERE i.tenant_id = @tenant_id::text AND i.account_period = @period::text
 ORDER BY i.id;
