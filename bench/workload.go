package bench

import "github.com/settlehq/settle/internal/workload"

// Workload is what a run generates: Records records of the workload
// Config describes (internal/workload, whose shares and sizes are those the
// bench always had for the same flags).
type Workload struct {
	Records int // input records, repeats included
	workload.Config
}

// generator returns the run's record stream.
func (w Workload) generator() (*workload.Workload, error) { return workload.New(w.Config) }
