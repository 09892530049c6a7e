-- settle schema, version 4: the outbox is append-only; what is left to
-- publish is a queue of ids.
--
-- Until now the relay marked each published row by rewriting it
-- (UPDATE ... SET published_at): a new row version, its index entries and
-- a dead tuple per settlement, about an eighth of PostgreSQL's time end to
-- end (settle bench). Every outbox row's id now also goes to
-- outbox_queue, and the relay deletes it there once the broker
-- acknowledged the message. The outbox itself is never changed again, so it
-- is append-only like the other audit tables: grants and triggers refuse
-- UPDATE, DELETE and TRUNCATE for everyone.
--
-- What goes: the time each row was published (settle explain says whether
-- a settlement's row is published; the message's Kafka timestamp says
-- when).
--
-- The database queues every new outbox row itself (a statement trigger, as
-- for webhook deliveries), whoever writes it: a settle of schema 3 still
-- running while this migration lands keeps inserting outbox rows, and
-- they must be published too. The lock keeps its inserts out until the
-- trigger is in place.
LOCK TABLE outbox IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE outbox_queue (
    id bigint PRIMARY KEY
);
INSERT INTO outbox_queue (id) SELECT id FROM outbox WHERE published_at IS NULL;
CREATE FUNCTION settle_outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_queue (id) SELECT id FROM new_rows;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_enqueue AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION settle_outbox_enqueue();

DROP VIEW outbox_messages;
DROP INDEX outbox_unpublished;
ALTER TABLE outbox DROP COLUMN published_at;
CREATE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value, o.headers,
       o.identity_id, o.created_at, q.id IS NULL AS published
  FROM outbox o
  LEFT JOIN identities i ON i.id = o.identity_id
  LEFT JOIN outbox_queue q ON q.id = o.id;
GRANT SELECT ON outbox_messages TO settle_app;

CREATE TRIGGER outbox_append_only BEFORE UPDATE OR DELETE ON outbox
    FOR EACH ROW EXECUTE FUNCTION settle_append_only();
CREATE TRIGGER outbox_no_truncate BEFORE TRUNCATE ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

GRANT SELECT, INSERT, DELETE ON outbox_queue TO settle_app;
