package analyst

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/settlehq/settle/settle/inspect"
)

// accountRowsMax caps the ledger rows, chains and settlements an account
// page lists (newest first); the CLI's `settle balance` reads further.
const accountRowsMax = 200

// accountAttention is what needs a look on an account's subject: its open
// cases and its records waiting for their target.
func (h *handler) accountAttention(r *http.Request, tenant, subject string) (*inspect.SubjectAttention, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	return h.cfg.Store.SubjectAttention(ctx, tenant, subject)
}

// Account is one account (a subject in one currency) with the settlement
// sequence behind its balance.
type Account struct {
	inspect.AccountView
	Settlements []inspect.AccountSettlement `json:"settlements"`
}

func (h *handler) account(r *http.Request) (tenant, subject string, accounts []Account, err error) {
	tenant, subject = r.PathValue("tenant"), r.PathValue("subject")
	rows := accountRowsMax
	if v := r.URL.Query().Get("rows"); v != "" {
		if rows, err = strconv.Atoi(v); err != nil || rows < 1 || rows > inspect.AccountSettlementsMax {
			return tenant, subject, nil, settleBadFilter("rows %q: want 1 to %d", v, inspect.AccountSettlementsMax)
		}
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	views, err := h.cfg.Store.Balances(ctx, tenant, subject, rows)
	if err != nil {
		return tenant, subject, nil, err
	}
	currency := r.URL.Query().Get("currency")
	accounts = []Account{}
	for _, v := range views {
		if currency != "" && v.Currency != currency {
			continue
		}
		seq, err := h.cfg.Store.AccountSettlements(ctx, tenant, subject, v.Currency, rows)
		if err != nil {
			return tenant, subject, nil, err
		}
		accounts = append(accounts, Account{AccountView: v, Settlements: seq})
	}
	return tenant, subject, accounts, nil
}

func (h *handler) apiAccount(w http.ResponseWriter, r *http.Request) {
	tenant, subject, accounts, err := h.account(r)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	if len(accounts) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no account of subject " + strconv.Quote(subject) + " for tenant " + strconv.Quote(tenant)})
		return
	}
	att, err := h.accountAttention(r, tenant, subject)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant_id": tenant, "subject": subject, "accounts": accounts,
		"open_cases": att.OpenCases, "waiting": att.Waiting})
}

func (h *handler) accountPage(w http.ResponseWriter, r *http.Request) {
	tenant, subject, accounts, err := h.account(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	att, err := h.accountAttention(r, tenant, subject)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	code := http.StatusOK
	if len(accounts) == 0 {
		code = http.StatusNotFound
	}
	h.renderCode(w, r, code, "account", map[string]any{"Title": "Account " + subject, "Nav": "search", "Tenant": tenant,
		"Subject": subject, "Accounts": accounts, "RowsMax": accountRowsMax, "Statements": statementLinks(tenant, subject, accounts),
		"Attention": att, "AttentionMax": inspect.SubjectRowsMax})
}

// statementLinks are the account's statements, one per period its ledger
// rows and settlements name, newest period first.
func statementLinks(tenant, subject string, accounts []Account) []statementLink {
	seen := map[string]bool{}
	for _, a := range accounts {
		for _, r := range a.Rows {
			seen[r.Period] = true
		}
		for _, st := range a.Settlements {
			seen[st.AccountPeriod] = true
		}
	}
	periods := slices.Sorted(maps.Keys(seen))
	slices.Reverse(periods)
	out := make([]statementLink, 0, len(periods))
	for _, p := range periods {
		out = append(out, statementLink{Period: p,
			URL: "/statement?" + url.Values{"tenant": {tenant}, "period": {p}, "subject": {subject}}.Encode()})
	}
	return out
}

// statementLink is a link to one period's statement of an account.
type statementLink struct{ Period, URL string }
