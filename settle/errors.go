package settle

import (
	"fmt"

	"github.com/settlehq/settle/settle/dberr"
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

// errKeptStale ends an attempt whose decisions met a kept account state that
// another writer has moved past (accountCache): contention, retried with
// the account read fresh.
var errKeptStale = fmt.Errorf("a kept account state is behind the database: %w", dberr.ErrContention)

// errLostRace is returned inside a transaction attempt when it finds that a
// concurrent transaction got somewhere first (a case id it could not read
// back); the attempt is rolled back and retried.
var errLostRace = fmt.Errorf("lost a race with a concurrent transaction: %w", dberr.ErrContention)
