package analyst

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/settle/inspect"
)

// CaseExportRowsMax caps one export from the page; `settle conflicts
// export` reads further.
const CaseExportRowsMax = 100_000

// CaseCSVHeader is the header row of a case export: the queue's columns,
// then the resolution's.
var CaseCSVHeader = []string{"case", "opened_at", "closed_at", "tenant_id", "account_period", "record_id", "operation",
	"reason", "status", "subject", "currency", "stored_amount", "incoming_amount", "detail",
	"decision", "resolved_by", "resolution_reason", "resolved_at", "resolution_amount", "resolution_settlement_id"}

// CaseCSVRow is one case as a row under CaseCSVHeader; r is its resolution,
// nil when it has none. Every cell is SpreadsheetSafe.
func CaseCSVRow(cs inspect.CaseSummary, r *inspect.CaseResolution) []string {
	closed := ""
	if cs.ClosedAt != nil {
		closed = cs.ClosedAt.UTC().Format(time.RFC3339Nano)
	}
	row := []string{strconv.FormatInt(cs.ID, 10), cs.OpenedAt.UTC().Format(time.RFC3339Nano), closed, cs.TenantID,
		cs.AccountPeriod, cs.RecordID, cs.Operation, cs.Reason, cs.Status, cs.Subject, cs.Currency,
		cs.StoredAmount, cs.IncomingAmount, cs.Detail, "", "", "", "", "", ""}
	if r != nil {
		copy(row[14:], []string{r.Decision, r.By, r.Reason, r.At.UTC().Format(time.RFC3339Nano), r.Amount, r.SettlementID})
	}
	for i := range row {
		row[i] = SpreadsheetSafe(row[i])
	}
	return row
}

// SpreadsheetSafe neutralises a cell a spreadsheet would read as a formula
// (OWASP "CSV injection"): a leading =, +, -, @, tab or carriage return
// gets a leading apostrophe, which spreadsheets show as text.
func SpreadsheetSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// casesCSV exports the queue under the page's filters (status open unless
// stated, as the queue shows it), every page of it, with resolutions.
func (h *handler) casesCSV(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("status") {
		q.Set("status", inspect.CaseOpen)
	}
	q.Del("after")
	q.Del("limit")
	f, err := filterFrom(q, time.Now())
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	f.Limit = inspect.CasePageRowsMax
	ctx, cancel := h.ctx(r)
	defer cancel()
	// The first page before any byte: a bad filter or a database down is
	// an error page, not a CSV cut after its header.
	page, err := h.cfg.Store.ListCases(ctx, f)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="cases.csv"`)
	cw := csv.NewWriter(w)
	// A write fails when the client has gone: stop, rather than read
	// further pages from the database for nobody.
	if err := cw.Write(CaseCSVHeader); err != nil {
		h.log.Error("export cases: write header", "err", err)
		return
	}
	for n := 0; ; {
		ids := make([]int64, len(page.Cases))
		for i, c := range page.Cases {
			ids[i] = c.ID
		}
		res, err := h.cfg.Store.CaseResolutions(ctx, ids)
		if err != nil {
			h.log.Error("export cases", "err", err)
			return // the response is cut short: a CSV without its end
		}
		for _, c := range page.Cases {
			var rp *inspect.CaseResolution
			if x, ok := res[c.ID]; ok {
				rp = &x
			}
			if err := cw.Write(CaseCSVRow(c, rp)); err != nil {
				h.log.Error("export cases: write case", "case", c.ID, "err", err)
				return
			}
			n++
		}
		if page.Next == "" || n >= CaseExportRowsMax {
			break
		}
		f.After = page.Next
		if page, err = h.cfg.Store.ListCases(ctx, f); err != nil {
			h.log.Error("export cases", "err", err)
			return
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		h.log.Error("export cases: write", "err", err)
	}
}
