-- name: DeliveryInsert :exec
-- The deliveries no other row records: a repeat of a settled or waiting
-- identity under other coordinates, and every delivery that was
-- quarantined (a case lists them all). A first delivery's coordinates are
-- on its identity, its waiting row or its dead letter (the deliveries
-- view shows them all). None of them failed: error keeps its default ''
-- (a dead letter's error is on its row).
INSERT INTO delivery_repeats (topic, partition, "offset", tenant_id, identity_id, case_id, outcome, reason)
SELECT k.topic, k.partition, k."offset", k.tenant_id, nullif(k.identity_id, 0), nullif(k.case_id, 0), k.outcome, k.reason
  FROM unnest(@topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @tenant_id::text[], @identity_id::bigint[], @case_id::bigint[], @outcome::text[], @reason::text[])
       AS k (topic, partition, "offset", tenant_id, identity_id, case_id, outcome, reason);

-- name: DeliveryLookup :batchmany
-- Deliveries already recorded for a batch's coordinates in rows of their
-- own: repeats, quarantines and dead letters. Those input records were
-- handled before (a redelivery) and get their stored result again. A
-- first delivery that claimed an identity or left a waiting row is found
-- on that row (identity_lookup.sql, waiting_lookup.sql). The caller gives
-- each input record's coordinates once, with its record's tenant
-- (@tenant_id; '' for a record that does not decode) and the tenant its
-- dead letter is under (@letter_tenant_id: what its bytes say, '' when
-- they say none): a repeat's row is under the first, a dead letter under
-- the second (or '', where letters written before they had a tenant
-- are), one key probe each. Each
-- probe is a LATERAL subquery (LIMIT 1 keeps it from being flattened), so
-- the batch's coordinates drive the join whatever the statistics say: a
-- plan cached while dead_letters was small had read every dead letter of
-- tenant '' for each batch (TestLookupPlansFollowGrowth).
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, coalesce(d.case_id, 0),
       i.tenant_id, i.account_period, i.record_id, i.operation, i.response
  FROM unnest(@topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @tenant_id::text[]) AS k (topic, partition, "offset", tenant_id)
 CROSS JOIN LATERAL (SELECT r.* FROM delivery_repeats r
                      WHERE r.tenant_id = k.tenant_id AND r.topic = k.topic AND r.partition = k.partition
                        AND r."offset" = k."offset" LIMIT 1) d
  LEFT JOIN identities i ON i.tenant_id = d.tenant_id AND i.id = d.identity_id
UNION ALL
SELECT l.topic, l.partition, l."offset", 'dead_lettered', l.reason, l.error, 0,
       NULL, NULL, NULL, NULL, NULL
  FROM unnest(@topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @letter_tenant_id::text[]) AS k (topic, partition, "offset", tenant_id)
 CROSS JOIN LATERAL (SELECT x.topic, x.partition, x."offset", x.reason, x.error FROM dead_letters x
                      WHERE x.tenant_id IN (k.tenant_id, '') AND x.topic = k.topic AND x.partition = k.partition
                        AND x."offset" = k."offset" LIMIT 1) l;
