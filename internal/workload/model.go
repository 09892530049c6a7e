package workload

// Model is the exact expectation of everything a Workload generated so
// far: per record (Record.Expect), per identity (Effects), per account
// (Accounts, Balance) and in total (Outcomes, ExpectedIdentities). It
// follows the stream: a Model read after more records are generated
// includes them. It is not safe for concurrent use with its Workload.
//
// Balance is credits, as the contract's ledger keeps it: usage and a
// correction's effect are negative, grants and refunds positive; holds move
// the held amount.
type Model struct {
	w          *Workload
	accounts   []modelAccount // by subject index
	outcomes   map[Expect]int
	identities int64
	records    int
	effects    map[Identity]Effect // nil unless Config.TrackEffects
}

type modelAccount struct {
	balance, held Amount
	records       int
}

// Account is one account's expected state.
type Account struct {
	Tenant, Subject, Currency string
	Balance                   Amount // the sum of its balance rows
	Held                      Amount // what its active holds reserve
	Records                   int    // records generated for it (repeats and poison included)
}

// Effect is what one identity must end as: its final outcome and the sums
// of the ledger rows it wrote, by bucket (zero for an identity that wrote
// none).
type Effect struct {
	Expect
	Balance, Held Amount
}

// Records is how many records the workload generated.
func (m *Model) Records() int { return m.records }

// ExpectedIdentities is how many identities the records store: those whose
// Record.New is true.
func (m *Model) ExpectedIdentities() int64 { return m.identities }

// Outcomes counts the records by expected outcome. It is a copy.
func (m *Model) Outcomes() map[Expect]int {
	out := make(map[Expect]int, len(m.outcomes))
	for k, v := range m.outcomes {
		out[k] = v
	}
	return out
}

// Accounts returns every account that has records, in subject order.
func (m *Model) Accounts() []Account {
	var out []Account
	for i := range m.accounts {
		if m.accounts[i].records > 0 {
			out = append(out, m.account(i))
		}
	}
	return out
}

// Balance returns the expected balance and held amount of the USD account
// of tenant and subject; ok is false when the workload has no record of it.
func (m *Model) Balance(tenant, subject string) (balance, held Amount, ok bool) {
	i, ok := m.w.index[tenant+"/"+subject]
	if !ok || m.accounts[i].records == 0 {
		return 0, 0, false
	}
	return m.accounts[i].balance, m.accounts[i].held, true
}

// Effects returns every identity's expected effect (a copy), or nil unless
// Config.TrackEffects.
func (m *Model) Effects() map[Identity]Effect {
	if m.effects == nil {
		return nil
	}
	out := make(map[Identity]Effect, len(m.effects))
	for k, v := range m.effects {
		out[k] = v
	}
	return out
}

func (m *Model) account(i int) Account {
	a := &m.w.accounts[i]
	return Account{Tenant: a.tenant, Subject: a.subject, Currency: currency,
		Balance: m.accounts[i].balance, Held: m.accounts[i].held, Records: m.accounts[i].records}
}

// record counts one record of account acct and returns its expectation.
func (m *Model) record(acct int, e Expect) Expect {
	m.records++
	m.accounts[acct].records++
	m.outcomes[e]++
	if e.New() {
		m.identities++
	}
	return e
}

// settle applies a new identity's effect: balance and held deltas.
func (m *Model) settle(acct int, id Identity, balance, held Amount) Expect {
	m.accounts[acct].balance += balance
	m.accounts[acct].held += held
	e := Expect{Outcome: OutcomeSettled}
	if m.effects != nil {
		m.effects[id] = Effect{Expect: e, Balance: balance, Held: held}
	}
	return m.record(acct, e)
}

// decide records a new identity that writes no rows (refused, or
// quarantined by a rule).
func (m *Model) decide(acct int, id Identity, outcome, reason string) Expect {
	e := Expect{Outcome: outcome, Reason: reason}
	if m.effects != nil {
		m.effects[id] = Effect{Expect: e}
	}
	return m.record(acct, e)
}

// repeat records a record that stores no identity: a duplicate, a
// conflicting repeat, a dead letter.
func (m *Model) repeat(acct int, outcome, reason string) Expect {
	return m.record(acct, Expect{Outcome: outcome, Reason: reason})
}
