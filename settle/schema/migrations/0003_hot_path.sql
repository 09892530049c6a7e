-- settle schema, version 3: a cheaper hot path, measured with settle bench.
--
-- 1. The foreign keys of the per-record tables go. Each one ran a trigger
--    per inserted row that read and share-locked the referenced row (a WAL
--    record and a dirtied page per lock): about 800,000 trigger queries and
--    a tenth of PostgreSQL's time per 200,000 records. The settling
--    transaction writes an identity, its ledger rows, its delivery and its
--    account update together, after locking the account, so the references
--    hold by construction; settle reconcile checks them (ledger rows without
--    identity or account, deliveries without identity, identities without
--    account). The foreign keys of the low-volume tables (chains, holds,
--    conflict cases, resolutions, waiting) stay.
ALTER TABLE identities     DROP CONSTRAINT identities_account_id_fkey,
                           DROP CONSTRAINT identities_root_id_fkey,
                           DROP CONSTRAINT identities_target_id_fkey;
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_identity_id_fkey,
                           DROP CONSTRAINT ledger_entries_account_id_fkey;
ALTER TABLE deliveries     DROP CONSTRAINT deliveries_identity_id_fkey,
                           DROP CONSTRAINT deliveries_case_id_fkey;

-- 2. Identity ids are reserved a block at a time: one nextval hands a batch
--    the ids v .. v+999 (identity_reserve.sql reads the step from the
--    sequence). Ids stay unique and increasing per batch, with gaps.
ALTER TABLE identities ALTER COLUMN id SET INCREMENT BY 1000;

-- 3. A settlement's outbox row names its identity instead of carrying a
--    copy of the response (≈ 570 bytes per record, written once by the
--    settling transaction and once more when the relay marks the row
--    published): the message is the identity's stored response, byte for
--    byte. Other outbox rows (results, dead letters) still carry their
--    value. outbox_messages is the one way to read a message.
ALTER TABLE outbox ADD COLUMN identity_id bigint,
                   ALTER COLUMN value DROP NOT NULL,
                   ADD CONSTRAINT outbox_value_or_identity CHECK (value IS NOT NULL OR identity_id IS NOT NULL);
CREATE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value, o.headers,
       o.identity_id, o.created_at, o.published_at
  FROM outbox o
  LEFT JOIN identities i ON i.id = o.identity_id;
GRANT SELECT ON outbox_messages TO settle_app;

-- 4. Webhook deliveries are queued once per statement, not by a trigger
--    query per outbox row (137,802 of them per 200,000 records, with no
--    subscription at all), and read a settlement's body from its identity.
CREATE OR REPLACE FUNCTION settle_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (outbox_id, tenant_id, settlement_id, body)
    SELECT n.id,
           coalesce(convert_from(m.value, 'UTF8')::jsonb #>> '{identity,tenant_id}', ''),
           coalesce(convert_from(m.value, 'UTF8')::jsonb ->> 'settlement_id', ''),
           m.value
      FROM new_rows n
      JOIN webhook_subscriptions s ON s.topic = n.topic
     CROSS JOIN LATERAL (SELECT coalesce(n.value, (SELECT convert_to(i.response::text, 'UTF8')
                                                     FROM identities i WHERE i.id = n.identity_id)) AS value) m
     ORDER BY n.id;
    RETURN NULL;
END
$$;
DROP TRIGGER outbox_webhook_enqueue ON outbox;
CREATE TRIGGER outbox_webhook_enqueue AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION settle_webhook_enqueue();
