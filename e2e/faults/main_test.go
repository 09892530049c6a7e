package faults

import (
	"os"
	"testing"

	"github.com/settlehq/settle/internal/proctest"
)

// TestMain removes the settle binary the tests built, after them.
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
