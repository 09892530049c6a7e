-- name: DeliveryLookup :batchmany
-- Deliveries already recorded for a batch's coordinates in rows of their
-- own: repeats, quarantines and dead letters. Those input records were
-- handled before (a redelivery) and get their stored result again. A
-- first delivery that claimed an identity or left a waiting row is found
-- on that row (identity_lookup.sql, waiting_lookup.sql). The caller gives
-- each input record's coordinates once, with its record's tenant
-- (@tenant_id; '' for a record that does not decode): a repeat's row is
-- under that tenant, a dead letter's under '' (dead letters belong to no
-- tenant, even those of records that decoded), one primary-key probe each.
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
  JOIN dead_letters l ON l.tenant_id = '' AND l.topic = k.topic AND l.partition = k.partition
                     AND l."offset" = k."offset";
