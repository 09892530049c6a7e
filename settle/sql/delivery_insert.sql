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
