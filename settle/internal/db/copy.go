package db

import "github.com/settlehq/settle/internal/pgq"

// The two COPYs of a settling transaction (identities, ledger entries)
// encode their rows themselves (pgq.CopyRows): pgq.Tx then sends them in
// PostgreSQL's binary COPY format without pgx's reflection
// (TestCopyWritesAsPgx).

// The generated iterators' rows, in the order of their COPY's columns
// (copyfrom.go, from identity_copy.sql and ledger_entry_copy.sql).

func (r *iteratorForIdentityCopy) AppendRows(w *pgq.CopyWriter) error {
	for i := range r.rows {
		p := &r.rows[i]
		w.Row(25)
		w.Int8(p.ID)
		w.Text(p.TenantID)
		w.Text(p.AccountPeriod)
		w.Text(p.RecordID)
		w.Text(p.Operation)
		w.Int8(p.Fingerprint)
		w.Int2(p.CanonicalVersion)
		w.Bytes(p.Canonical)
		w.Text(p.Outcome)
		w.Text(p.Reason)
		w.Bytes(p.Response)
		w.Textp(p.SettlementID)
		w.Int8p(p.AccountID)
		w.Int8p(p.RootID)
		w.Text(p.Source)
		w.Jsonb(p.Attributes)
		w.Text(p.Topic)
		w.Int4(p.Partition)
		w.Int8(p.Offset)
		w.Timestamptz(p.FirstSeenAt)
		w.Timestamptz(p.LastAttemptedAt)
		w.Int4(p.Attempts)
		w.Text(p.Subject)
		w.Text(p.Currency)
		w.Int8p(p.TargetID)
	}
	return nil
}

func (r *iteratorForLedgerEntryCopy) AppendRows(w *pgq.CopyWriter) error {
	for i := range r.rows {
		p := &r.rows[i]
		w.Row(10)
		w.Int8(p.ID)
		w.Int8(p.IdentityID)
		w.Int8(p.AccountID)
		w.Text(p.TenantID)
		w.Text(p.Bucket)
		if err := w.Numeric(p.Amount); err != nil {
			return err
		}
		w.Bytes(p.ChainHash)
		w.Int8p(p.Seq)
		if err := w.Numeric(p.BalanceAfter); err != nil {
			return err
		}
		if err := w.Numeric(p.HeldAfter); err != nil {
			return err
		}
	}
	return nil
}
