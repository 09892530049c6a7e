-- name: TargetLookup :batchmany
-- Records that operations of a batch name as their targets, by (tenant,
-- period, record_id), whatever their kind: the caller tells a good target
-- from one of the wrong kind. Operations that share their target's
-- record_id (refund, reclaim, hold_release, expire, resolution) are never
-- targets.
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, i.reason,
       i.fingerprint, i.canonical_version, i.canonical, i.response, coalesce(i.settlement_id, ''),
       i.subject, i.currency, coalesce(i.account_id, 0), coalesce(i.root_id, 0),
       i.topic, i.partition, i."offset"
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[]) AS k (tenant_id, account_period, record_id)
  JOIN identities i ON i.tenant_id = k.tenant_id AND i.account_period = k.account_period AND i.record_id = k.record_id
 WHERE i.operation NOT IN ('refund', 'reclaim', 'hold_release', 'expire', 'resolution');
