-- Deliveries already recorded for a batch's coordinates: those input records
-- were handled before (a redelivery) and get their stored result again.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, coalesce(d.case_id, 0),
       i.tenant_id, i.account_period, i.record_id, i.operation, i.response
  FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS k (topic, partition, "offset")
  JOIN deliveries d ON d.topic = k.topic AND d.partition = k.partition AND d."offset" = k."offset"
  LEFT JOIN identities i ON i.id = d.identity_id
