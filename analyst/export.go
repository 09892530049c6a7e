package analyst

import (
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/settle/inspect"
)

// CaseExportRowsMax is the default cap of one export from the page
// (Config.ExportRowsMax); `settle conflicts export` reads further.
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

// exportStallMax is how long an export waits for a reader that takes
// nothing: past it the reader is gone, and the connection is cut.
const exportStallMax = time.Minute

// ExportRowsHeader announces, on every export, the most rows one holds:
// an export that would hold more is refused before its first byte.
const ExportRowsHeader = "Settle-Export-Rows-Max"

// errExportTooLarge refuses an export beyond the cap: the filters, not a
// retry, change the answer.
var errExportTooLarge = errors.New("export too large")

// casesCSV exports the queue under the page's filters (status open unless
// stated, as the queue shows it), every page of it, with resolutions.
//
// It completes or fails visibly. Before the first byte it counts what the
// filters select and refuses (422) more than Config.ExportRowsMax, and
// reads the first page (a bad filter or a database down is an error page).
// Once the body has begun, a failure aborts the connection, so the client
// sees a body without its end (curl exits non-zero), never a short CSV
// that looks whole. Each read has the request timeout; the export as a
// whole has none, only a reader that stalls past exportStallMax is cut.
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
	rowsMax := h.cfg.ExportRowsMax
	ctx, cancel := h.ctx(r)
	count, err := h.cfg.Store.CountCasesUpTo(ctx, f, rowsMax+1)
	cancel()
	if err == nil && count > int64(rowsMax) {
		err = fmt.Errorf("%w: the filters select more than %d cases, the most one export holds: narrow them "+
			"(tenant, period, reason, age), or use `settle conflicts export`, which has no cap", errExportTooLarge, rowsMax)
	}
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	page, err := h.queueRead(r, f)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	rc := http.NewResponseController(w)
	abort := func(what string, err error) {
		if r.Context().Err() != nil {
			h.log.Warn("export cases: the client went away", "rows", count, "err", err)
		} else {
			h.log.Error("export cases cut short: the connection is aborted so the client sees it", "at", what, "err", err)
		}
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the body
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="cases.csv"`)
	w.Header().Set(ExportRowsHeader, strconv.Itoa(rowsMax))
	cw := csv.NewWriter(w)
	// Each page's write may wait for the reader up to exportStallMax,
	// whatever the server's WriteTimeout (meant for short answers).
	_ = rc.SetWriteDeadline(time.Now().Add(exportStallMax)) // ErrNotSupported: no deadline to extend
	if err := cw.Write(CaseCSVHeader); err != nil {
		abort("header", err)
	}
	for n := 0; ; {
		ids := make([]int64, len(page.Cases))
		for i, c := range page.Cases {
			ids[i] = c.ID
		}
		ctx, cancel := h.ctx(r)
		res, err := h.cfg.Store.CaseResolutions(ctx, ids)
		cancel()
		if err != nil {
			abort("resolutions", err)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(exportStallMax))
		for _, c := range page.Cases {
			var rp *inspect.CaseResolution
			if x, ok := res[c.ID]; ok {
				rp = &x
			}
			if err := cw.Write(CaseCSVRow(c, rp)); err != nil {
				abort("case "+strconv.FormatInt(c.ID, 10), err)
			}
			n++
		}
		if page.Next == "" {
			break
		}
		if n >= rowsMax { // more than counted: cases came in meanwhile
			abort("cap", fmt.Errorf("more than %d cases", rowsMax))
		}
		f.After = page.Next
		if page, err = h.queueRead(r, f); err != nil {
			abort("page", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		abort("end", err)
	}
}

// queueRead reads one page of the queue within the request timeout.
func (h *handler) queueRead(r *http.Request, f inspect.CaseFilter) (*inspect.CasePage, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	return h.cfg.Store.ListCases(ctx, f)
}
