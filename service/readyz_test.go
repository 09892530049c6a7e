package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestReadyzTellsOfBatches: a running service's /readyz lists a record
// batch it dead-lettered whole (a gzip batch past the consumer's cap:
// topic, partition, first and next offset, reason) and stays ready, its
// partition having moved on; a batch it cannot read at all (a zstd batch
// whose data does not decode) on the other partition turns it not ready,
// naming that partition.
func TestReadyzTellsOfBatches(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	store := settletest.NewStore(t, settle.Config{})
	bomb := kafkatest.RecordBatch(t, "gzip", 200, func(int) []byte { return make([]byte, 32<<10) }) // 6.4 MB of zeros
	k.ProduceBatch(t, "usage", 0, bomb)
	s, err := New(Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer:        consumer.Config{SessionTimeout: time.Second, DecompressBatchBytesMax: 1 << 20},
		ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	type answer struct {
		Ready   bool                    `json:"ready"`
		Reasons []string                `json:"reasons"`
		Skipped []consumer.SkippedBatch `json:"skipped_batches"`
	}
	readyz := func() (int, answer) {
		code, body := testnet.HTTPGet("http://" + s.AdminAddr().String() + "/readyz")
		var a answer
		_ = json.Unmarshal([]byte(body), &a)
		return code, a
	}
	testnet.WaitFor(t, "/readyz 200 listing the skipped batch", 20*time.Second, func() bool {
		code, a := readyz()
		return code == 200 && a.Ready && len(a.Skipped) == 1
	})
	if _, a := readyz(); a.Skipped[0].Topic != "usage" || a.Skipped[0].Partition != 0 || a.Skipped[0].Offset != 0 ||
		a.Skipped[0].NextOffset != 200 || a.Skipped[0].Reason != message.ReasonBatchTooLarge {
		t.Errorf("skipped batch: %+v, want usage/0 offsets 0 to 199, batch_too_large", a.Skipped[0])
	}

	garbage := kafkatest.RecordBatch(t, "zstd", 1, func(int) []byte { return []byte("x") })
	for i := 65; i < len(garbage); i++ {
		garbage[i] ^= 0x5a
	}
	kafkatest.SetBatchCRC(garbage)
	k.ProduceBatch(t, "usage", 1, garbage)
	testnet.WaitFor(t, "/readyz 503 naming partition 1", 20*time.Second, func() bool {
		code, a := readyz()
		return code == 503 && len(a.Reasons) > 0 && strings.Contains(strings.Join(a.Reasons, "; "), "partition usage/1 unreadable")
	})
}
