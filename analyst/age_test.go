package analyst_test

import (
	"testing"
	"time"

	"github.com/settlehq/settle/analyst"
)

// TestParseAge: an age in days past what a time.Duration holds is refused,
// not wrapped round to a negative age (which made --older-than 106752d
// list the cases of the last minutes).
func TestParseAge(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]time.Duration{"90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "106751d": 106751 * 24 * time.Hour} {
		if got, err := analyst.ParseAge(s); err != nil || got != want {
			t.Errorf("ParseAge(%s) = %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"106752d", "200000d", "-1d", "x", "-5m"} {
		if got, err := analyst.ParseAge(s); err == nil {
			t.Errorf("ParseAge(%s) = %s, want an error", s, got)
		}
	}
}
