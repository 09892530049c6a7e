-- name: DeliveryLookup :batchmany
-- Deliveries already recorded for a batch's coordinates in rows of their
-- own: repeats, quarantines and dead letters. Those input records were
-- handled before (a redelivery) and get their stored result again. A
-- first delivery that claimed an identity or left a waiting row is found
-- on that row (identity_lookup.sql, waiting_lookup.sql). A repeat's row is
-- under its record's tenant; a dead letter, under '': the caller asks for
-- each decoded record's coordinates under both (@tenant_id), one primary-key
-- probe each.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, coalesce(d.case_id, 0),
       i.tenant_id, i.account_period, i.record_id, i.operation, i.response
  FROM unnest(@topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @tenant_id::text[]) AS k (topic, partition, "offset", tenant_id)
  JOIN delivery_repeats d ON d.tenant_id = k.tenant_id AND d.topic = k.topic AND d.partition = k.partition
                         AND d."offset" = k."offset"
  LEFT JOIN identities i ON i.tenant_id = d.tenant_id AND i.id = d.identity_id
UNION ALL
SELECT l.topic, l.partition, l."offset", 'dead_lettered', l.reason, l.error, 0,
       NULL, NULL, NULL, NULL, NULL
  FROM unnest(@topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @tenant_id::text[]) AS k (topic, partition, "offset", tenant_id)
  JOIN dead_letters l ON l.tenant_id = k.tenant_id AND l.topic = k.topic AND l.partition = k.partition
                     AND l."offset" = k."offset";
