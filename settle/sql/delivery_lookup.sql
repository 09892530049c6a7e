-- Deliveries already recorded for a batch's coordinates in rows of their
-- own: repeats, quarantines and dead letters. Those input records were
-- handled before (a redelivery) and get their stored result again. A
-- first delivery that claimed an identity or left a waiting row is found
-- on that row (identity_lookup.sql, waiting_lookup.sql).
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, coalesce(d.case_id, 0),
       i.tenant_id, i.account_period, i.record_id, i.operation, i.response
  FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS k (topic, partition, "offset")
  JOIN delivery_repeats d ON d.topic = k.topic AND d.partition = k.partition AND d."offset" = k."offset"
  LEFT JOIN identities i ON i.id = d.identity_id
UNION ALL
SELECT l.topic, l.partition, l."offset", 'dead_lettered', l.reason, l.error, 0,
       NULL, NULL, NULL, NULL, NULL
  FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS k (topic, partition, "offset")
  JOIN dead_letters l ON l.topic = k.topic AND l.partition = k.partition AND l."offset" = k."offset"
