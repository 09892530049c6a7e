package consumer

import (
	"math"
	"testing"
)

// TestDecompressBatchBytesFor: the cap is a sixteenth of the memory limit,
// between 4 and 64 MiB, and 64 MiB without a limit.
func TestDecompressBatchBytesFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit int64
		want  int
	}{
		{384 << 20, 24 << 20},
		{32 << 20, 4 << 20},
		{4 << 30, 64 << 20},
		{math.MaxInt64, 64 << 20},
		{0, 64 << 20},
	} {
		if got := DecompressBatchBytesFor(c.limit); got != c.want {
			t.Errorf("limit %d: cap %d, want %d", c.limit, got, c.want)
		}
	}
}
