-- settle schema, version 5: outbox rows the broker refuses for good are
-- parked.
--
-- A message the broker will never take (larger than the topic's
-- max.message.bytes, or a record it calls invalid) stayed at the head of
-- the queue: the relay retried it for ever and published nothing behind it
-- in its partition. The relay now takes such a row off the queue and
-- records here why (the broker's error, as a reason code and its text).
-- Parking is terminal: the row stays in the outbox (append-only), is not
-- published, and settle reconcile reports it as parked, with its reason,
-- instead of as unpublished.
CREATE TABLE outbox_parked (
    id     bigint      PRIMARY KEY,
    reason text        NOT NULL,
    error  text        NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT outbox_parked_outbox_fkey FOREIGN KEY (id) REFERENCES outbox (id)
);
CREATE TRIGGER outbox_parked_append_only BEFORE UPDATE OR DELETE ON outbox_parked
    FOR EACH ROW EXECUTE FUNCTION settle_append_only();
CREATE TRIGGER outbox_parked_no_truncate BEFORE TRUNCATE ON outbox_parked
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();
GRANT SELECT, INSERT ON outbox_parked TO settle_app;

-- A parked row is not published; parked says so. The columns before it are
-- those of version 4, so CREATE OR REPLACE keeps the grants.
CREATE OR REPLACE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value, o.headers,
       o.identity_id, o.created_at, q.id IS NULL AND p.id IS NULL AS published, p.id IS NOT NULL AS parked
  FROM outbox o
  LEFT JOIN identities i ON i.id = o.identity_id
  LEFT JOIN outbox_queue q ON q.id = o.id
  LEFT JOIN outbox_parked p ON p.id = o.id;
GRANT SELECT ON outbox_parked TO settle_reader;
