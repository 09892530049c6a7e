-- name: IdentityLookup :batchmany
-- Identities of a batch that are already settled (same columns as
-- target_lookup.sql).
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, i.reason,
       i.fingerprint, i.canonical_version, i.canonical, i.response, coalesce(i.settlement_id, ''),
       i.subject, i.currency, coalesce(i.account_id, 0), coalesce(i.root_id, 0),
       i.topic, i.partition, i."offset"
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[]) AS k (tenant_id, account_period, record_id, operation)
  JOIN identities i ON i.tenant_id = k.tenant_id AND i.account_period = k.account_period
                   AND i.record_id = k.record_id AND i.operation = k.operation;
