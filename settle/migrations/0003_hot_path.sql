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
