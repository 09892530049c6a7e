package inspect

import (
	"context"
	"time"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
)

// SubjectRowsMax caps the open cases and the waiting records one account
// page lists.
const SubjectRowsMax = 100

// OpenCase is one open case of a subject: the account page's list.
type OpenCase struct {
	ID             int64     `json:"id"`
	Period         string    `json:"account_period"`
	RecordID       string    `json:"record_id"`
	Operation      string    `json:"operation"`
	Reason         string    `json:"reason"`
	OpenedAt       time.Time `json:"opened_at"`
	IncomingAmount string    `json:"incoming_amount,omitempty"`
	StoredAmount   string    `json:"stored_amount,omitempty"`
	Currency       string    `json:"currency,omitempty"`
}

// WaitingRecord is one record of a subject still waiting for its target.
type WaitingRecord struct {
	Period       string    `json:"account_period"`
	RecordID     string    `json:"record_id"`
	Operation    string    `json:"operation"`
	TargetPeriod string    `json:"target_period"`
	TargetRecord string    `json:"target_record_id"`
	Since        time.Time `json:"since"`
	Currency     string    `json:"currency,omitempty"`
}

// SubjectAttention is what needs a look on one subject's accounts: its
// open cases and its records waiting for their target, oldest first, at
// most SubjectRowsMax of each. A refund, reclaim or hold release names no
// subject of its own (its canonical form is the identity alone), so it is
// listed under the record it waits for, not here.
type SubjectAttention struct {
	OpenCases []OpenCase      `json:"open_cases"`
	Waiting   []WaitingRecord `json:"waiting"`
}

// SubjectAttention reads the open cases and waiting records of one subject
// of a tenant.
func (s *Store) SubjectAttention(ctx context.Context, tenant, subject string) (*SubjectAttention, error) {
	q := db.On(s.pool)
	cs, err := q.ConflictCaseOpenOfSubject(ctx, db.ConflictCaseOpenOfSubjectParams{Tenant: tenant, Subject: subject, CasesMax: SubjectRowsMax})
	if err != nil {
		return nil, dberr.Wrap("open cases of tenant="+tenant+" subject="+subject, err)
	}
	out := &SubjectAttention{OpenCases: make([]OpenCase, 0, len(cs)), Waiting: []WaitingRecord{}}
	for _, c := range cs {
		out.OpenCases = append(out.OpenCases, OpenCase{ID: c.ID, Period: c.AccountPeriod, RecordID: c.RecordID, Operation: c.Operation,
			Reason: c.Reason, OpenedAt: c.OpenedAt, IncomingAmount: c.IncomingAmount, StoredAmount: c.StoredAmount, Currency: c.Currency})
	}
	ws, err := q.WaitingOfSubject(ctx, db.WaitingOfSubjectParams{Tenant: tenant, Subject: subject, RowsMax: SubjectRowsMax})
	if err != nil {
		return nil, dberr.Wrap("waiting records of tenant="+tenant+" subject="+subject, err)
	}
	for _, w := range ws {
		out.Waiting = append(out.Waiting, WaitingRecord{Period: w.AccountPeriod, RecordID: w.RecordID, Operation: w.Operation,
			TargetPeriod: w.TargetPeriod, TargetRecord: w.TargetRecordID, Since: w.Since, Currency: w.Currency})
	}
	return out, nil
}
