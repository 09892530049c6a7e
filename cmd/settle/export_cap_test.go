package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle/message"
)

// TestConflictsExportCapFails: `settle conflicts export` past its cap (1,000
// here, for 1,200 cases) exits 1 saying the output is incomplete, instead
// of exiting 0 with the first pages. Not parallel: it lowers the cap.
func TestConflictsExportCapFails(t *testing.T) {
	d := newAnalystDB(t)
	var ins []message.Input
	for _, amount := range []string{"40", "55"} {
		for i := range 1200 {
			ins = append(ins, message.Input{Topic: "usage", Offset: int64(len(ins)), Value: usageRecord("acme", fmt.Sprintf("u-%d", i), "cust-1", amount)})
		}
	}
	for len(ins) > 0 {
		b := ins[:min(len(ins), 1000)]
		ins = ins[len(b):]
		d.settle(t, b...)
	}
	defer func(n int) { exportRowsMax = n }(exportRowsMax)
	exportRowsMax = 1000
	out := d.cli(t, 1, "conflicts", "export")
	if !strings.Contains(out, "more than 1000 cases") || !strings.Contains(out, "incomplete") {
		t.Errorf("export past the cap: %.500s", out[max(0, len(out)-500):])
	}
	exportRowsMax = 1200
	d.cli(t, 0, "conflicts", "export")
}
