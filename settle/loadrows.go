package settle

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

// readHolds reads locked hold rows (hold_lock.sql); their accounts are
// attached by the caller once locked.
func (st *txState) readHolds(br pgx.BatchResults) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			h                 hold
			amount, remaining string
		)
		if err := rows.Scan(&h.identityID, &h.tenant, &h.accountID, &amount, &remaining, &h.expiresAt, &h.status, &h.closedBy, &h.rev,
			&h.key.AccountPeriod, &h.key.RecordID, &h.settlementID); err != nil {
			return fmt.Errorf("lock holds: %w", err)
		}
		h.amount, h.remaining = money.MustParse(amount), money.MustParse(remaining)
		h.key.TenantID, h.key.Operation = h.tenant, record.KindHold
		if st.holds[h.identityID] == nil {
			st.holds[h.identityID] = &h
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock holds: %w", err)
	}
	return nil
}

func (st *txState) readDeliveries(br pgx.BatchResults) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			c             Coordinates
			outcome       string
			r             Result
			t, p, rid, op *string
			response      []byte
		)
		if err := rows.Scan(&c.Topic, &c.Partition, &c.Offset, &outcome, &r.Reason, &r.Error, &r.CaseID, &t, &p, &rid, &op, &response); err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		r.Version, r.Source, r.Outcome, r.Redelivered = SchemaVersionOutput, c, Outcome(outcome), true
		if t != nil {
			r.Identity = &IdentityJSON{*t, *p, *rid, *op}
			if r.Outcome != OutcomeQuarantined || r.Reason != ReasonFingerprintMismatch {
				r.Response = response
			}
			r.Replayed = r.Outcome == OutcomeDuplicate
		}
		st.redelivered[c] = r
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read deliveries: %w", err)
	}
	return nil
}

// readIdentities reads identity rows (identity_lookup or target_lookup).
func (st *txState) readIdentities(br pgx.BatchResults, byIdentity bool) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			id      identity
			op, out string
			fp      int64
		)
		if err := rows.Scan(&id.id, &id.key.TenantID, &id.key.AccountPeriod, &id.key.RecordID, &op, &out, &id.reason,
			&fp, &id.version, &id.canonical, &id.response, &id.settlementID, &id.subject, &id.currency,
			&id.accountID, &id.rootID, &id.source.Topic, &id.source.Partition, &id.source.Offset); err != nil {
			return fmt.Errorf("read identities: %w", err)
		}
		id.key.Operation, id.fp, id.outcome = record.Kind(op), uint64(fp), Outcome(out)
		if prior, ok := st.identities[id.key]; ok {
			// Found by both look-ups: keep one value.
			if !byIdentity {
				st.index(prior)
			}
			continue
		}
		st.identities[id.key] = &id
		if !byIdentity || canBeTarget(id.key.Operation) {
			st.index(&id)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read identities: %w", err)
	}
	return nil
}

// index makes an identity findable as a target.
func (st *txState) index(id *identity) {
	if !canBeTarget(id.key.Operation) || id.key.Operation == record.KindExpire {
		return
	}
	k := recKey{id.key.TenantID, id.key.AccountPeriod, id.key.RecordID}
	for _, x := range st.byRecord[k] {
		if x == id {
			return
		}
	}
	st.byRecord[k] = append(st.byRecord[k], id)
}

func (st *txState) readWaiting(br pgx.BatchResults) ([]*waitingOp, error) {
	var out []*waitingOp
	rows, _ := br.Query()
	for rows.Next() {
		var (
			w       waitingOp
			in      Input
			id      record.Identity
			op      string
			fp      int64
			headers []byte
		)
		if err := rows.Scan(&w.id, &id.TenantID, &id.AccountPeriod, &id.RecordID, &op, &w.target.period, &w.target.record,
			&fp, &w.canonical, &in.Key, &in.Value, &headers, &in.Topic, &in.Partition, &in.Offset,
			&w.response, &w.status, &w.caseID); err != nil {
			return nil, fmt.Errorf("read waiting operations: %w", err)
		}
		id.Operation, w.fp, w.target.tenant = record.Kind(op), uint64(fp), id.TenantID
		if _, seen := st.waitingByID[id]; seen {
			continue
		}
		var err error
		if in.Headers, err = DecodeHeaders(headers); err != nil {
			return nil, fmt.Errorf("waiting operation %s: headers: %w", id, err)
		}
		// A waiting operation is stored as the bytes it arrived with.
		p := st.s.dec.Prepare(in.Value, in.Headers)
		d := decodedOf(&in, &p)
		if d.err != nil {
			return nil, fmt.Errorf("waiting operation %s no longer decodes: %w", id, d.err)
		}
		w.d = &d
		st.waitingByID[id] = &w
		st.waitingByTarget[w.target] = append(st.waitingByTarget[w.target], &w)
		out = append(out, &w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read waiting operations: %w", err)
	}
	return out, nil
}

// readAccounts reads locked account rows; want >= 0 asserts their number.
func (st *txState) readAccounts(br pgx.BatchResults, want int) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	rows, _ := br.Query()
	n := 0
	for rows.Next() {
		var (
			a             account
			balance, held string
		)
		if err := rows.Scan(&a.id, &a.key.tenant, &a.key.subject, &a.key.currency, &balance, &held, &a.seq, &a.head); err != nil {
			return fmt.Errorf("read accounts: %w", err)
		}
		n++
		if st.accountsByID[a.id] != nil {
			continue
		}
		a.balance, a.held = money.MustParse(balance), money.MustParse(held)
		a.seqBefore = a.seq
		st.accounts[a.key] = &a
		st.accountsByID[a.id] = &a
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	if want >= 0 && n != want {
		// An account this process knew is gone: the database was restored
		// or replaced under it. Forget what it knew and try again.
		st.s.accountIDs.forget()
		return fmt.Errorf("lock accounts: locked %d of %d: %w", n, want, errLostRace)
	}
	return nil
}
