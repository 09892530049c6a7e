package outlet

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RefusedForGood names the broker's error ("message_too_large") when err
// says that the broker will never take the record as it is, and "" for
// anything a retry may cure (an outage, a timeout, a stopped client,
// missing permissions, a topic still being created).
func RefusedForGood(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	var ke *kerr.Error
	if err == nil || !errors.As(err, &ke) {
		return ""
	}
	switch ke {
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.InvalidTimestamp:
		return strings.ToLower(ke.Message)
	}
	return ""
}

// RefusedError is the outcome of a record the broker refused for good on
// its own (in a batch of its own) and that the owner's Refused put nothing
// in place of: the owner keeps it another way (the relay parks its row) or
// reports it.
type RefusedError struct {
	Reason string // the broker's error, lower case: "message_too_large"
	Err    error  // the broker's answer
}

func (e *RefusedError) Error() string { return "refused for good by the broker: " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }
