// Package kafkaerr tells the broker's answers a retry may cure from those
// it never will, for the two producers of the service: the relay (which
// parks such a message) and the consumer (which publishes such a result
// without its key and headers).
package kafkaerr

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
