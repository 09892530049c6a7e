package main

import (
	"errors"
	"testing"

	"github.com/settlehq/settle/settle/reconcile"
)

// errFull stands for a full disk or a closed pipe under the command's output.
var errFull = errors.New("no space left on device")

// fullWriter fails every write, as stdout does when it is redirected to a
// full disk or a closed pipe.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errFull }

// TestReportWriteErrorFails: a reconcile report that cannot be written is an
// error of the command (so it does not exit 0 with its output lost), and the
// cause survives wrapping.
func TestReportWriteErrorFails(t *testing.T) {
	t.Parallel()
	a := &app{stdout: fullWriter{}}
	r := &reconcile.Report{Checks: []reconcile.Check{{Name: "ledger balances"}}}
	if err := printReport(a, r); !errors.Is(err, errFull) {
		t.Errorf("printReport to a full stdout: %v, want %v", err, errFull)
	}
	sr := &reconcile.SourceReport{}
	if err := printSourceReport(a, sr); !errors.Is(err, errFull) {
		t.Errorf("printSourceReport to a full stdout: %v, want %v", err, errFull)
	}
}
