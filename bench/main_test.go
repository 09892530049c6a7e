package bench

import (
	"os"
	"testing"

	"github.com/settlehq/settle/internal/proctest"
)

// TestMain removes the settle binary the edge part's tests built.
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
