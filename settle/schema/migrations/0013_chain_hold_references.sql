-- settle schema, version 13: chains and holds keep their references
-- without foreign keys, as the other per-record tables do (migration 0003).
--
-- A chain names its account and its root, refund and reclaim identities; a
-- hold its account, its own identity and the one that closed it. Each
-- foreign key made every insert probe the row it names and lock it FOR KEY
-- SHARE: an identity or account row written again, one WAL record each,
-- and after a checkpoint the full image of its page (TestWALPerTable:
-- 1,937 -> 1,763 B per record with full-page images, 1,576 -> 1,561
-- without). The settling transaction writes a chain or a hold in the same
-- transaction as the rows it names, or after them; settle reconcile's
-- references_resolve check (reconcile_references.sql) is the guard.
ALTER TABLE chains DROP CONSTRAINT chains_account_id_fkey,
                   DROP CONSTRAINT chains_root_id_fkey,
                   DROP CONSTRAINT chains_refund_id_fkey,
                   DROP CONSTRAINT chains_reclaim_id_fkey;
ALTER TABLE holds DROP CONSTRAINT holds_account_id_fkey,
                  DROP CONSTRAINT holds_identity_id_fkey,
                  DROP CONSTRAINT holds_closed_by_fkey;
