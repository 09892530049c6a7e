// Package jsontest makes strings for the tests of the hand-written JSON
// encoders, which must give encoding/json's bytes.
package jsontest

import (
	"math/rand/v2"
	"strings"
)

// pieces hold everything encoding/json escapes or replaces: HTML
// characters, quotes, control characters, invalid UTF-8, U+2028 and
// U+2029, beside plain and multi-byte text.
var pieces = []string{"", "a", "t-9", "2026-07", "ünï", "<b>&", `"q"`, `\`, "\n\t\r\b\f", "\x00\x1f\x7f", "\xff\xfe",
	"\u2028\u2029", "€", "😀", "-12.50", "0a2335faed"}

// String returns a random string of up to four pieces, empty one time in
// four.
func String(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range rng.IntN(4) + 1 {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}
