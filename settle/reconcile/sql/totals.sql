-- name: Totals :one
-- The totals of a database a run with a known workload checks against
-- (settlements_topic: the settlements topic), in one row:
--   deliveries, distinct delivered coordinates: one delivery per input record
--   identities (+ still waiting): one identity per logical record; settled:
--     those that settled
--   entries_expected vs entries: the ledger rows every stored response
--     announces, against the rows written (one effect per identity)
--   settled_effects vs outbox_settlements: one settlements message per effect
--   bad_accounts: accounts whose balance or held (account_states) differs from the
--     sum of their rows
--   unpublished: outbox rows the relay has not published
--   keys, keys_done, keys_in_progress: the HTTP edge's Idempotency-Keys, and
--     those answered and those still claimed
SELECT (SELECT count(*) FROM deliveries) AS deliveries,
       (SELECT count(*) FROM (SELECT DISTINCT topic, partition, "offset" FROM deliveries) d) AS delivered_coordinates,
       (SELECT count(*) FROM identities) AS identities,
       (SELECT count(*) FROM identities WHERE outcome = 'settled') AS settled,
       (SELECT count(*) FROM waiting WHERE status <> 'applied') AS waiting,
       (SELECT coalesce(sum(json_array_length(coalesce(response -> 'entries', '[]'::json))), 0) FROM identities)::bigint AS entries_expected,
       (SELECT count(*) FROM ledger_entries) AS entries,
       (SELECT count(*) FROM identities
         WHERE outcome = 'settled' AND json_array_length(coalesce(response -> 'entries', '[]'::json)) > 0) AS settled_effects,
       ((SELECT count(*) FROM outbox WHERE topic = @settlements_topic::text)
        + (SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_settlements WHERE topic = @settlements_topic::text))::bigint AS outbox_settlements,
       (SELECT count(*) FROM (SELECT identity_id FROM ledger_entries GROUP BY identity_id
                               HAVING count(DISTINCT created_at) > 1) x) AS split_effects,
       (SELECT count(*) FROM account_states a
         LEFT JOIN (SELECT account_id,
                           sum(amount) FILTER (WHERE bucket = 'balance') AS b,
                           sum(amount) FILTER (WHERE bucket = 'held') AS h
                      FROM ledger_entries GROUP BY account_id) s ON s.account_id = a.id
         WHERE a.balance <> coalesce(s.b, 0) OR a.held <> coalesce(s.h, 0)) AS bad_accounts,
       (SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_queue)::bigint AS unpublished,
       (SELECT count(*) FROM idempotency_keys) AS keys,
       (SELECT count(*) FROM idempotency_keys WHERE status = 'done') AS keys_done,
       (SELECT count(*) FROM idempotency_keys WHERE status = 'in_progress') AS keys_in_progress;
