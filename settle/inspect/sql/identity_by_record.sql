-- name: IdentityByRecord :many
-- Every operation of one record_id (the scope key's prefix).
SELECT i.id, i.operation, i.outcome, i.reason, coalesce(i.settlement_id, ''), i.subject, i.currency,
       i.response, i.canonical, i.source, i.attributes, i.topic, i.partition, i."offset",
       i.first_seen_at, i.last_attempted_at, i.committed_at, i.attempts,
       coalesce(i.root_id, 0), coalesce(i.target_id, 0), coalesce(i.account_id, 0)
  FROM identities i
 WHERE i.tenant_id = $1 AND i.account_period = $2 AND i.record_id = $3
 ORDER BY i.id;
