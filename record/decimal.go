package record

import (
	"errors"
	"fmt"
)

// DecimalDigitsMax is the hard cap on the integer digits and, separately, on
// the fraction digits of a normalised decimal, applied whatever limits the
// caller asks for. Without it "1e999999999" would normalise to a string of a
// billion digits; with it such a value is refused before anything is
// allocated. A thousand digits is far beyond any quantity a meter reports.
const DecimalDigitsMax = 1000

// exponentMax saturates parsed exponents; any exponent this large already
// exceeds DecimalDigitsMax, so saturation cannot change an outcome, and it
// keeps the arithmetic below far from int64 overflow.
const exponentMax = 1 << 40

// NormalizeDecimal checks that s has the form D+(.D+)?([eE][+-]?D+)? (no
// sign) and returns its exact normal form: no exponent, no leading zeros in
// the integer part ("0" when it is zero), no trailing zeros in the fraction
// and no "." when the value is integral. "40", "40.0", "4E1", "4.0e+1" and
// "400e-1" all give "40"; "0.50" gives "0.5"; "0e5" gives "0".
//
// The limits apply to the normal form, so "1.0000000000" fits 9 fraction
// digits and "1e18" (19 integer digits) does not fit 18. A limit ≤ 0 means
// no limit other than DecimalDigitsMax. The conversion is textual and exact;
// no floating point is involved.
func NormalizeDecimal(s string, intDigitsMax, fracDigitsMax int) (string, error) {
	if intDigitsMax <= 0 || intDigitsMax > DecimalDigitsMax {
		intDigitsMax = DecimalDigitsMax
	}
	if fracDigitsMax <= 0 || fracDigitsMax > DecimalDigitsMax {
		fracDigitsMax = DecimalDigitsMax
	}
	if s == "" {
		return "", errors.New(`"" is not a decimal; the form is D+(.D+)?([eE][+-]?D+)?, e.g. "12.5"`)
	}
	if s[0] == '-' {
		return "", fmt.Errorf("%s is negative; decimals are unsigned, of the form D+(.D+)?([eE][+-]?D+)?", quote(s))
	}
	malformed := func() (string, error) {
		return "", fmt.Errorf("%s is not a decimal; the form is D+(.D+)?([eE][+-]?D+)? with no sign, e.g. \"12.5\"", quote(s))
	}

	// Split into integer digits s[0:ie], fraction digits s[fs:fe] and the
	// exponent.
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	ie := i
	if ie == 0 {
		return malformed()
	}
	fs, fe := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fs = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fe = i
		if fe == fs {
			return malformed()
		}
	}
	var exp int64
	hasExp := false
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		hasExp = true
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if exp < exponentMax {
				exp = exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return malformed()
		}
		exp = min(exp, exponentMax)
		if neg {
			exp = -exp
		}
	}
	if i != len(s) {
		return malformed()
	}

	intPart, fracPart := s[:ie], s[fs:fe]
	nd := len(intPart) + len(fracPart)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return fracPart[k-len(intPart)]
	}

	// Fast path: already in normal form, the common case for amounts.
	if !hasExp && (intPart == "0" || intPart[0] != '0') && (len(fracPart) == 0 || fracPart[len(fracPart)-1] != '0') {
		intDigits := len(intPart)
		if intPart == "0" {
			intDigits = 0
		}
		if err := checkDigits(s, int64(intDigits), int64(len(fracPart)), intDigitsMax, fracDigitsMax); err != nil {
			return "", err
		}
		return s, nil
	}

	// The significant digits are digit(lo)..digit(hi-1); the decimal point
	// sits point digits after digit(lo) (negative: before it).
	lo := 0
	for lo < nd && digit(lo) == '0' {
		lo++
	}
	if lo == nd {
		return "0", nil
	}
	hi := nd
	for digit(hi-1) == '0' {
		hi--
	}
	n := int64(hi - lo)
	point := int64(len(intPart)) + exp - int64(lo)

	var intDigits, fracDigits, leadZeros int64
	switch {
	case point >= n:
		intDigits = point
	case point > 0:
		intDigits, fracDigits = point, n-point
	default:
		leadZeros = -point
		fracDigits = n + leadZeros
	}
	if err := checkDigits(s, intDigits, fracDigits, intDigitsMax, fracDigitsMax); err != nil {
		return "", err
	}

	size := intDigits + fracDigits
	if intDigits == 0 {
		size++ // "0"
	}
	if fracDigits > 0 {
		size++ // "."
	}
	b := make([]byte, 0, size)
	if intDigits == 0 {
		b = append(b, '0')
	}
	k := lo
	for j := int64(0); j < intDigits; j++ {
		if k < hi {
			b = append(b, digit(k))
			k++
		} else {
			b = append(b, '0')
		}
	}
	if fracDigits > 0 {
		b = append(b, '.')
		for j := int64(0); j < leadZeros; j++ {
			b = append(b, '0')
		}
		for ; k < hi; k++ {
			b = append(b, digit(k))
		}
	}
	return string(b), nil
}

func checkDigits(s string, intDigits, fracDigits int64, intDigitsMax, fracDigitsMax int) error {
	if intDigits > int64(intDigitsMax) {
		return fmt.Errorf("%s has more than %d integer digits", quote(s), intDigitsMax)
	}
	if fracDigits > int64(fracDigitsMax) {
		return fmt.Errorf("%s has more than %d fraction digits", quote(s), fracDigitsMax)
	}
	return nil
}

// isZeroDecimal reports whether a normalised decimal is zero.
func isZeroDecimal(s string) bool { return s == "0" }
