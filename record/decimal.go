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
	d, ok := splitDecimal(s)
	if !ok {
		return "", fmt.Errorf("%s is not a decimal; the form is D+(.D+)?([eE][+-]?D+)? with no sign, e.g. \"12.5\"", quote(s))
	}

	// Fast path: already in normal form, the common case for amounts.
	if d.isNormal() {
		intDigits := len(d.intPart)
		if d.intPart == "0" {
			intDigits = 0
		}
		if err := checkDigits(s, int64(intDigits), int64(len(d.fracPart)), intDigitsMax, fracDigitsMax); err != nil {
			return "", err
		}
		return s, nil
	}

	lo, hi, zero := d.significant()
	if zero {
		return "0", nil
	}
	l := d.layout(lo, hi)
	if err := checkDigits(s, l.intDigits, l.fracDigits, intDigitsMax, fracDigitsMax); err != nil {
		return "", err
	}
	return d.normalForm(lo, hi, l), nil
}

// decimalParts is a decimal split into its integer digits, its fraction
// digits and its exponent, each still a slice of the input.
type decimalParts struct {
	intPart, fracPart string
	exp               int64
	hasExp            bool
}

// splitDecimal splits s of the form D+(.D+)?([eE][+-]?D+)? into its parts;
// ok is false when s does not have that form. The exponent saturates at
// ±exponentMax.
func splitDecimal(s string) (d decimalParts, ok bool) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	ie := i
	if ie == 0 {
		return d, false
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
			return d, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		d.hasExp = true
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if d.exp < exponentMax {
				d.exp = d.exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return d, false
		}
		d.exp = min(d.exp, exponentMax)
		if neg {
			d.exp = -d.exp
		}
	}
	if i != len(s) {
		return d, false
	}
	d.intPart, d.fracPart = s[:ie], s[fs:fe]
	return d, true
}

// isNormal reports whether the input already is its own normal form: no
// exponent, no leading zero in the integer part, no trailing zero in the
// fraction.
func (d *decimalParts) isNormal() bool {
	return !d.hasExp && (d.intPart == "0" || d.intPart[0] != '0') &&
		(len(d.fracPart) == 0 || d.fracPart[len(d.fracPart)-1] != '0')
}

// digit is the k-th digit of the integer digits followed by the fraction
// digits.
func (d *decimalParts) digit(k int) byte {
	if k < len(d.intPart) {
		return d.intPart[k]
	}
	return d.fracPart[k-len(d.intPart)]
}

// significant returns the significant digits as the range digit(lo) ..
// digit(hi-1), or zero when every digit is 0.
func (d *decimalParts) significant() (lo, hi int, zero bool) {
	nd := len(d.intPart) + len(d.fracPart)
	for lo < nd && d.digit(lo) == '0' {
		lo++
	}
	if lo == nd {
		return 0, 0, true
	}
	hi = nd
	for d.digit(hi-1) == '0' {
		hi--
	}
	return lo, hi, false
}

// decimalLayout is the shape of a normal form: its integer digits, its
// fraction digits, and how many of those fraction digits are zeros before the
// first significant one.
type decimalLayout struct {
	intDigits, fracDigits, leadZeros int64
}

// layout places the decimal point among the significant digits lo..hi-1: it
// sits point digits after digit(lo) (negative: before it).
func (d *decimalParts) layout(lo, hi int) decimalLayout {
	n := int64(hi - lo)
	point := int64(len(d.intPart)) + d.exp - int64(lo)
	switch {
	case point >= n:
		return decimalLayout{intDigits: point}
	case point > 0:
		return decimalLayout{intDigits: point, fracDigits: n - point}
	default:
		return decimalLayout{fracDigits: n - point, leadZeros: -point}
	}
}

// normalForm writes the significant digits lo..hi-1 laid out as l into a
// buffer of the exact size.
func (d *decimalParts) normalForm(lo, hi int, l decimalLayout) string {
	size := l.intDigits + l.fracDigits
	if l.intDigits == 0 {
		size++ // "0"
	}
	if l.fracDigits > 0 {
		size++ // "."
	}
	b := make([]byte, 0, size)
	if l.intDigits == 0 {
		b = append(b, '0')
	}
	k := lo
	for j := int64(0); j < l.intDigits; j++ {
		if k < hi {
			b = append(b, d.digit(k))
			k++
		} else {
			b = append(b, '0')
		}
	}
	if l.fracDigits > 0 {
		b = append(b, '.')
		for j := int64(0); j < l.leadZeros; j++ {
			b = append(b, '0')
		}
		for ; k < hi; k++ {
			b = append(b, d.digit(k))
		}
	}
	return string(b)
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
