// Package kafkalog routes the Kafka client's own log (franz-go's warnings
// and errors about brokers and connections) to a *slog.Logger, so every
// client of the service and of the operator commands logs where the
// process logs. It holds no state and never opens a connection.
package kafkalog

import (
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Option is the franz-go option that sends the client's warnings and
// errors to log, as warnings of component kafka.
func Option(log *slog.Logger) kgo.Opt {
	return kgo.WithLogger(kgo.BasicLogger(writer{log}, kgo.LogLevelWarn, nil))
}

type writer struct{ log *slog.Logger }

func (w writer) Write(p []byte) (int, error) {
	w.log.Warn(strings.TrimSpace(string(p)), "component", "kafka")
	return len(p), nil
}
