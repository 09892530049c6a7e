-- name: DeadLetterReplayLastOf :many
-- Where each of the dead letters named by the arrays (tenant, id) was last
-- sent back to (its newest dead_letter_replays row, by the primary key's
-- prefix), in the order given: the page a replay form redirects to shows
-- them. A letter never replayed (or whose replays were pruned) has no row.
SELECT k.n::integer AS n, r.topic, r.partition, r."offset"
  FROM unnest(sqlc.arg(tenant_ids)::text[], sqlc.arg(dead_letter_ids)::bigint[]) WITH ORDINALITY AS k (tenant_id, dead_letter_id, n)
 CROSS JOIN LATERAL (SELECT r.topic, r.partition, r."offset"
                       FROM dead_letter_replays r
                      WHERE r.tenant_id = k.tenant_id AND r.dead_letter_id = k.dead_letter_id
                      ORDER BY r.at DESC, r."offset" DESC
                      LIMIT 1) r
 ORDER BY k.n;
