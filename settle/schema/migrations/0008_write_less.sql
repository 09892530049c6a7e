-- settle schema, version 8: the settling transaction writes less per
-- record (BENCHMARKS.md, "WAL per record").
--
-- 1. A settlement's outbox row stores what its identity does not.
--
-- A settlement's message headers (settlement_id, tenant_id, sequence,
-- kind, version) were a jsonb copy on its outbox row (≈ 280 bytes per
-- settlement, parsed by PostgreSQL on every insert). settlement_id and
-- tenant_id are on the identity; the row now keeps sequence, kind and
-- version as plain columns, and in headers only what the identity cannot
-- give: the input record's trace context (traceparent, tracestate),
-- usually none. The relay assembles the headers itself
-- (settle.settlementHeaders: parsing the stored response or building jsonb
-- here costs PostgreSQL ten times the read of the row); outbox_messages
-- builds the same headers in the same order for every other reader, and
-- adds the parts at the end.
--
-- Rows written before this version carry their full headers and no
-- sequence: they are shown as they are.
ALTER TABLE outbox ADD COLUMN sequence bigint,
                   ADD COLUMN kind text,
                   ADD COLUMN version smallint;

CREATE OR REPLACE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value,
       CASE WHEN o.sequence IS NULL THEN o.headers
            ELSE jsonb_build_array(
                     jsonb_build_object('key', 'settlement_id', 'value', encode(convert_to(i.settlement_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'tenant_id', 'value', encode(convert_to(i.tenant_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'sequence', 'value', encode(convert_to(o.sequence::text, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'kind', 'value', encode(convert_to(o.kind, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'version', 'value', encode(convert_to(o.version::text, 'UTF8'), 'base64')))
                 || o.headers
       END AS headers,
       o.identity_id, o.created_at, q.id IS NULL AND p.id IS NULL AS published, p.id IS NOT NULL AS parked,
       o.headers AS stored_headers, i.settlement_id, i.tenant_id AS settlement_tenant_id, o.sequence, o.kind, o.version
  FROM outbox o
  LEFT JOIN identities i ON i.id = o.identity_id
  LEFT JOIN outbox_queue q ON q.id = o.id
  LEFT JOIN outbox_parked p ON p.id = o.id;

-- 2. An account row is rewritten by every batch that moves it (balance,
--    held, seq, chain_head; no indexed column): with room on its page the
--    new version is a heap-only tuple, without, it goes to another page
--    with new entries in both of the account's indexes. Half-empty pages
--    keep the rewrites heap-only. Accounts are few (one per subject and
--    currency), so the space is small.
ALTER TABLE accounts SET (fillfactor = 50);

-- 3. A first delivery is written once. An input record's coordinates are
--    already on the row its first delivery wrote: the identity it claimed,
--    the waiting row it left, its dead letter. The table of delivery rows
--    keeps only the deliveries no other row records (a repeat under other
--    coordinates, and every quarantined delivery, so that a case lists all
--    of its own), as delivery_repeats; the view deliveries shows every
--    delivery, one row per input record as before, for every reader. Its
--    constraint and index names stay (errors.go maps deliveries_pkey).
--
--    An identity's row is a first delivery when an input record claimed
--    it: not a resolution or an expiry (no topic), not an operation that
--    waited first (its delivery is the waiting row), not a quarantine (its
--    delivery has a row of its own).
ALTER TABLE deliveries RENAME TO delivery_repeats;

ALTER TABLE delivery_repeats DISABLE TRIGGER deliveries_append_only;
DELETE FROM delivery_repeats d
 WHERE (d.outcome IN ('settled', 'refused')
        AND EXISTS (SELECT 1 FROM identities i
                     WHERE i.id = d.identity_id AND i.outcome = d.outcome
                       AND i.topic = d.topic AND i.partition = d.partition AND i."offset" = d."offset"))
    OR (d.outcome = 'waiting'
        AND EXISTS (SELECT 1 FROM waiting w
                     WHERE w.topic = d.topic AND w.partition = d.partition AND w."offset" = d."offset"))
    OR (d.outcome = 'dead_lettered'
        AND EXISTS (SELECT 1 FROM dead_letters l
                     WHERE l.topic = d.topic AND l.partition = d.partition AND l."offset" = d."offset"));
ALTER TABLE delivery_repeats ENABLE TRIGGER deliveries_append_only;

-- The read side finds an identity's first delivery by time (the overview's
-- timeline) and by coordinates (explain); identities arrive in time and,
-- per partition, in offset order, so block-range indexes serve both for
-- almost no write cost.
CREATE INDEX identities_committed ON identities USING brin (committed_at);
CREATE INDEX identities_offset ON identities USING brin ("offset");

CREATE VIEW deliveries AS
SELECT d.topic, d.partition, d."offset", d.tenant_id, d.identity_id, d.case_id, d.outcome, d.reason, d.error, d.at
  FROM delivery_repeats d
UNION ALL
SELECT i.topic, i.partition, i."offset", i.tenant_id, i.id, NULL::bigint, i.outcome, i.reason, '', i.committed_at
  FROM identities i
 WHERE i.topic <> '' AND i.outcome <> 'quarantined'
   AND NOT EXISTS (SELECT 1 FROM waiting w
                    WHERE w.tenant_id = i.tenant_id AND w.account_period = i.account_period
                      AND w.record_id = i.record_id AND w.operation = i.operation)
UNION ALL
SELECT w.topic, w.partition, w."offset", w.tenant_id, NULL::bigint, NULL::bigint, 'waiting', '', '', w.since
  FROM waiting w
UNION ALL
SELECT l.topic, l.partition, l."offset", '', NULL::bigint, NULL::bigint, 'dead_lettered', l.reason, l.error, l.at
  FROM dead_letters l;
GRANT SELECT ON deliveries TO settle_app, settle_reader;
GRANT SELECT ON delivery_repeats TO settle_reader;

-- identity_audit counted the rows of the renamed table: it counts every
-- delivery again.
CREATE OR REPLACE VIEW identity_audit AS
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       i.outcome, i.first_seen_at, i.committed_at,
       greatest(i.last_attempted_at, max(d.at)) AS last_attempted_at,
       count(d.*) AS deliveries
  FROM identities i
  LEFT JOIN deliveries d ON d.identity_id = i.id
 GROUP BY i.id;
