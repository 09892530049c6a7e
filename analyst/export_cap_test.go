package analyst_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settlehq/settle/analyst"
)

// TestExportCapRefusedBeforeFirstByte: an export whose filters select more
// cases than Config.ExportRowsMax is refused with 422 and a message that
// says what to do, before any CSV byte; one within the cap arrives whole
// and announces the cap in a header.
func TestExportCapRefusedBeforeFirstByte(t *testing.T) {
	t.Parallel()
	s := manyCases(t, 1200)
	for _, c := range []struct {
		rowsMax, code, rows int
	}{{1000, http.StatusUnprocessableEntity, 0}, {1200, http.StatusOK, 1200}} {
		srv := exportServer(t, analyst.Config{Store: analyst.StoreOf(s), ExportRowsMax: c.rowsMax})
		resp, err := http.Get(srv.URL + "/cases.csv")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.code {
			t.Fatalf("cap %d: %d, %v, want %d: %.300s", c.rowsMax, resp.StatusCode, err, c.code, body)
		}
		if c.code != http.StatusOK {
			if strings.Contains(resp.Header.Get("Content-Type"), "csv") || !strings.Contains(string(body), "more than 1000 cases") ||
				!strings.Contains(string(body), "settle conflicts export") {
				t.Errorf("cap %d: refusal %q: %.400s", c.rowsMax, resp.Header.Get("Content-Type"), body)
			}
			continue
		}
		if got := strings.Count(string(body), "\n") - 1; got != c.rows || resp.Header.Get(analyst.ExportRowsHeader) != "1200" {
			t.Errorf("cap %d: %d rows, header %q", c.rowsMax, got, resp.Header.Get(analyst.ExportRowsHeader))
		}
	}
}
