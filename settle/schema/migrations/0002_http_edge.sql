-- settle schema, version 2: the HTTP edge.
--
-- Idempotency keys of POST /v1/records, and webhook delivery of settlements
-- to an external endpoint. Both tables are claimed with an attempt id and a
-- lease, and every result is a fenced write: an UPDATE that names the
-- attempt id it expects, so an attempt that lost its claim changes nothing.

-- One row per (tenant, Idempotency-Key), kept forever (CONTRACT.md section
-- 7: dedup state is kept forever by default). The row id names the HTTP
-- records' coordinates (topic 'http', partition 0, offset id * 1024 +
-- index), so an attempt that takes over an expired claim settles under the
-- same coordinates and the settling core answers it with the stored result
-- instead of settling again.
CREATE TABLE idempotency_keys (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text        NOT NULL,
    key             text        NOT NULL,
    -- SHA-256 of the request body: the fast filter. canonicals (the
    -- canonical form of each record, in order) decide, so a retry whose bytes
    -- differ only in formatting or non-material fields is still a retry.
    request_hash    bytea       NOT NULL,
    canonicals      bytea[]     NOT NULL,
    records         integer     NOT NULL,
    attempt_id      uuid        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 1,
    status          text        NOT NULL DEFAULT 'in_progress',
    lease_until     timestamptz NOT NULL,
    response_status integer,
    response        bytea, -- the exact bytes answered, replayed byte for byte
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    CONSTRAINT idempotency_keys_key UNIQUE (tenant_id, key),
    CONSTRAINT idempotency_keys_status_check CHECK (status IN ('in_progress', 'done')),
    CONSTRAINT idempotency_keys_done_check CHECK ((status = 'done') = (response IS NOT NULL AND response_status IS NOT NULL)),
    CONSTRAINT idempotency_keys_key_length CHECK (length(key) BETWEEN 1 AND 255)
);

-- A key's request and its answer never change once written: only the claim
-- columns move, and only while the key is in progress. The service role is
-- held to that by its column grants; this trigger holds everyone to it.
CREATE FUNCTION settle_idempotency_keys_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'settle: DELETE on idempotency_keys is not allowed: keys are kept'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status = 'done' THEN
        RAISE EXCEPTION 'settle: idempotency key % of tenant % is done: its response never changes', OLD.key, OLD.tenant_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.key <> OLD.key OR NEW.request_hash <> OLD.request_hash
       OR NEW.canonicals <> OLD.canonicals OR NEW.records <> OLD.records OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'settle: the request of idempotency key % never changes', OLD.key
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER idempotency_keys_guard BEFORE UPDATE OR DELETE ON idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION settle_idempotency_keys_guard();
CREATE TRIGGER idempotency_keys_no_truncate BEFORE TRUNCATE ON idempotency_keys
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

-- Topics whose outbox rows are also delivered by webhook. The service adds
-- the settlements topic when it starts with a webhook URL; from then on
-- every settlement is queued in the transaction that settles it (the
-- trigger below), so nothing is skipped however transactions commit.
CREATE TABLE webhook_subscriptions (
    topic      text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per settlement to deliver. status: pending (waiting for its next
-- attempt at next_attempt_at), in_flight (claimed by attempt_id until
-- lease_until; past it, another worker takes it over), done, dead (its last
-- attempt failed: visible here and in webhook_dead_letters).
CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id       bigint      NOT NULL REFERENCES outbox (id),
    tenant_id       text        NOT NULL,
    settlement_id   text        NOT NULL,
    body            bytea       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    attempt_id      uuid,
    attempts        integer     NOT NULL DEFAULT 0,
    lease_until     timestamptz,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz,
    CONSTRAINT webhook_deliveries_outbox_key UNIQUE (outbox_id),
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'in_flight', 'done', 'dead')),
    CONSTRAINT webhook_deliveries_claim_check CHECK (status <> 'in_flight' OR (attempt_id IS NOT NULL AND lease_until IS NOT NULL))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until, id) WHERE status = 'in_flight';
CREATE INDEX webhook_deliveries_dead ON webhook_deliveries (id) WHERE status = 'dead';

CREATE FUNCTION settle_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM webhook_subscriptions WHERE topic = NEW.topic) THEN
        INSERT INTO webhook_deliveries (outbox_id, tenant_id, settlement_id, body)
        VALUES (NEW.id,
                coalesce(convert_from(NEW.value, 'UTF8')::jsonb #>> '{identity,tenant_id}', ''),
                coalesce(convert_from(NEW.value, 'UTF8')::jsonb ->> 'settlement_id', ''),
                NEW.value);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_webhook_enqueue AFTER INSERT ON outbox
    FOR EACH ROW EXECUTE FUNCTION settle_webhook_enqueue();

-- A finished delivery stays finished; what was sent never changes.
CREATE FUNCTION settle_webhook_deliveries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'settle: DELETE on webhook_deliveries is not allowed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status IN ('done', 'dead') THEN
        RAISE EXCEPTION 'settle: webhook delivery % is %: it never changes', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.outbox_id <> OLD.outbox_id OR NEW.settlement_id <> OLD.settlement_id OR NEW.body <> OLD.body
       OR NEW.tenant_id <> OLD.tenant_id OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'settle: what webhook delivery % sends never changes', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER webhook_deliveries_guard BEFORE UPDATE OR DELETE ON webhook_deliveries
    FOR EACH ROW EXECUTE FUNCTION settle_webhook_deliveries_guard();
CREATE TRIGGER webhook_deliveries_no_truncate BEFORE TRUNCATE ON webhook_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

-- Dead-lettered webhook deliveries, for operators.
CREATE VIEW webhook_dead_letters AS
SELECT id, tenant_id, settlement_id, outbox_id, attempts, last_status, last_error, created_at, done_at AS dead_at
  FROM webhook_deliveries
 WHERE status = 'dead';

REVOKE ALL ON idempotency_keys, webhook_subscriptions, webhook_deliveries, webhook_dead_letters FROM PUBLIC;
GRANT SELECT, INSERT ON idempotency_keys, webhook_deliveries TO settle_app;
GRANT SELECT, INSERT ON webhook_subscriptions TO settle_app;
GRANT UPDATE (attempt_id, attempts, status, lease_until, response_status, response, completed_at) ON idempotency_keys TO settle_app;
GRANT UPDATE (status, attempt_id, attempts, lease_until, next_attempt_at, last_status, last_error, done_at) ON webhook_deliveries TO settle_app;
GRANT SELECT ON webhook_dead_letters TO settle_app;
-- The settling transaction reserves identity ids with nextval (see
-- identity_reserve.sql), which needs USAGE on the sequence: version 1 did
-- not grant it, so the service role could not settle. Granting twice is
-- harmless.
GRANT USAGE ON SEQUENCE identities_id_seq TO settle_app;
