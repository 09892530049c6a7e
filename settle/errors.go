package settle

import (
	"fmt"
)

// BatchError is a failure of a whole batch that is neither an outage nor
// contention: a defect, or a record the database refuses for a reason the
// decoder did not catch. Callers bisect the batch to find the record.
type BatchError struct {
	Records int
	Err     error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("settle batch of %d records: %v", e.Records, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }
