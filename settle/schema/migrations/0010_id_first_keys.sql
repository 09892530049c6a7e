-- settle schema, version 10: the tables the settling transaction and the
-- HTTP edge look up by a natural key are keyed (id, tenant_id).
--
-- Their primary keys were (tenant_id, id), beside a unique key that also
-- leads with tenant_id (identities (tenant_id, account_period, record_id,
-- operation), accounts (tenant_id, subject, currency), waiting, idempotency
-- keys, dead letters by their coordinates), and a plain index on id for the
-- look-ups by an id alone. A plan
-- made while a table is small (a statement's generic plan, cached for the
-- connection's life until the table is first analysed) may then choose the
-- primary key for a natural-key look-up, with tenant_id its only index
-- condition: every look-up reads the tenant's every row. Seen on a fresh
-- database (settle bench --only edge, auto_explain): 17–330 ms to look up
-- a batch's identities at 40,000 rows. Keyed (id, tenant_id), the primary
-- key serves the look-ups by id, with or without the tenant, and cannot
-- serve a look-up by a natural key; the plain indexes on id go (one index
-- less to write per identity and per queued message). The tenant is still
-- in every key, as a distributed PostgreSQL (Citus) and hash partitioning
-- by tenant require, and the foreign keys still name (tenant_id, id).
-- identity_audit groups by the primary key: it is made again as it was.
DROP VIEW identity_audit;
ALTER TABLE chains           DROP CONSTRAINT chains_account_id_fkey,
                             DROP CONSTRAINT chains_root_id_fkey,
                             DROP CONSTRAINT chains_refund_id_fkey,
                             DROP CONSTRAINT chains_reclaim_id_fkey;
ALTER TABLE holds            DROP CONSTRAINT holds_account_id_fkey,
                             DROP CONSTRAINT holds_identity_id_fkey,
                             DROP CONSTRAINT holds_closed_by_fkey;
ALTER TABLE conflict_cases   DROP CONSTRAINT conflict_cases_identity_id_fkey;
ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_identity_id_fkey;
ALTER TABLE dead_letter_replays DROP CONSTRAINT dead_letter_replays_dead_letter_fkey;

ALTER TABLE identities       DROP CONSTRAINT identities_pkey,
                             ADD CONSTRAINT identities_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE accounts         DROP CONSTRAINT accounts_pkey,
                             ADD CONSTRAINT accounts_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE waiting          DROP CONSTRAINT waiting_pkey,
                             ADD CONSTRAINT waiting_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE outbox_queue     DROP CONSTRAINT outbox_queue_pkey,
                             ADD CONSTRAINT outbox_queue_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey,
                             ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE dead_letters     DROP CONSTRAINT dead_letters_pkey,
                             ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (id, tenant_id);
DROP INDEX identities_id, accounts_id, waiting_id, outbox_queue_id, idempotency_keys_id, dead_letters_id;

ALTER TABLE chains ADD CONSTRAINT chains_account_id_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id),
                   ADD CONSTRAINT chains_root_id_fkey FOREIGN KEY (tenant_id, root_id) REFERENCES identities (tenant_id, id),
                   ADD CONSTRAINT chains_refund_id_fkey FOREIGN KEY (tenant_id, refund_id) REFERENCES identities (tenant_id, id),
                   ADD CONSTRAINT chains_reclaim_id_fkey FOREIGN KEY (tenant_id, reclaim_id) REFERENCES identities (tenant_id, id);
ALTER TABLE holds ADD CONSTRAINT holds_account_id_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id),
                  ADD CONSTRAINT holds_identity_id_fkey FOREIGN KEY (tenant_id, identity_id) REFERENCES identities (tenant_id, id),
                  ADD CONSTRAINT holds_closed_by_fkey FOREIGN KEY (tenant_id, closed_by) REFERENCES identities (tenant_id, id);
ALTER TABLE conflict_cases ADD CONSTRAINT conflict_cases_identity_id_fkey FOREIGN KEY (tenant_id, identity_id)
    REFERENCES identities (tenant_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE case_resolutions ADD CONSTRAINT case_resolutions_identity_id_fkey FOREIGN KEY (tenant_id, identity_id)
    REFERENCES identities (tenant_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE dead_letter_replays ADD CONSTRAINT dead_letter_replays_dead_letter_fkey FOREIGN KEY (tenant_id, dead_letter_id)
    REFERENCES dead_letters (tenant_id, id);

CREATE VIEW identity_audit AS
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       i.outcome, i.first_seen_at, i.committed_at,
       greatest(i.last_attempted_at, max(d.at)) AS last_attempted_at,
       count(d.*) AS deliveries
  FROM identities i
  LEFT JOIN deliveries d ON d.tenant_id = i.tenant_id AND d.identity_id = i.id
 GROUP BY i.tenant_id, i.id;
GRANT SELECT ON identity_audit TO settle_app;
