-- Tables of the baselines, in each run's database beside settle's schema.
-- bl_* have the keys a per-record handler needs (the identity's unique key);
-- ceil_* have none: the no-checks bulk COPY is the ceiling of writing the
-- same three rows per record.
CREATE TABLE bl_identities (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text   NOT NULL,
    account_period text   NOT NULL,
    record_id      text   NOT NULL,
    operation      text   NOT NULL,
    fingerprint    bigint NOT NULL,
    canonical      bytea  NOT NULL,
    response       json   NOT NULL,
    CONSTRAINT bl_identities_scope_key UNIQUE (tenant_id, account_period, record_id, operation)
);
CREATE TABLE bl_ledger (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    identity_id bigint  NOT NULL,
    account     text    NOT NULL,
    amount      numeric NOT NULL
);
CREATE TABLE bl_outbox (
    id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic text  NOT NULL,
    key   bytea,
    value bytea NOT NULL
);
CREATE TABLE ceil_identities (
    tenant_id      text   NOT NULL,
    account_period text   NOT NULL,
    record_id      text   NOT NULL,
    operation      text   NOT NULL,
    fingerprint    bigint NOT NULL,
    canonical      bytea  NOT NULL,
    response       json   NOT NULL
);
CREATE TABLE ceil_ledger (
    record_id text    NOT NULL,
    account   text    NOT NULL,
    amount    numeric NOT NULL
);
CREATE TABLE ceil_outbox (
    topic text  NOT NULL,
    key   bytea,
    value bytea NOT NULL
);
