package record

import (
	"fmt"
	"time"
)

// parseRFC3339 parses an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.F]Z or
// with a ±HH:MM offset; 'T' and 'Z' may be lowercase, as RFC 3339 allows) and
// returns it in UTC. It is stricter than time.Parse where strictness keeps
// fingerprints exact: more than 9 fraction digits would be silently
// truncated to nanoseconds, so they are refused; leap seconds cannot be
// represented, so they are refused; and the UTC result must have a four-digit
// year so that its canonical form is RFC 3339 again. On failure it returns a
// message saying what is wrong.
func parseRFC3339(s string) (time.Time, string) {
	const form = "the form is YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)"
	if len(s) < len("2006-01-02T15:04:05") {
		return time.Time{}, form
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if !isDigit(c) {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, form
	}
	switch {
	case month < 1 || month > 12:
		return time.Time{}, "month out of range"
	case day < 1 || day > daysIn(year, month):
		return time.Time{}, "day out of range"
	case hour > 23:
		return time.Time{}, "hour out of range"
	case minute > 59:
		return time.Time{}, "minute out of range"
	case sec == 60:
		return time.Time{}, "leap seconds are not supported"
	case sec > 59:
		return time.Time{}, "second out of range"
	}
	i := 19
	nsec := 0
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		n := i - j
		switch {
		case n == 0:
			return time.Time{}, "no digits after '.'"
		case n > 9:
			return time.Time{}, "more than 9 fraction digits (nanoseconds)"
		}
		nsec, _ = num(j, n)
		for ; n < 9; n++ {
			nsec *= 10
		}
	}
	if i >= len(s) {
		return time.Time{}, "missing time zone offset (Z or ±HH:MM)"
	}
	offset := 0
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		if len(s)-i != 6 || s[i+3] != ':' {
			return time.Time{}, "time zone offset must be Z or ±HH:MM"
		}
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, "time zone offset out of range"
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return time.Time{}, "time zone offset must be Z or ±HH:MM"
	}
	if i != len(s) {
		return time.Time{}, fmt.Sprintf("unexpected %s after the time", quote(s[i:]))
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, "outside years 0000-9999 in UTC"
	}
	return t, ""
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// appendRFC3339 appends t in UTC as YYYY-MM-DDTHH:MM:SS[.F]Z, with the
// fraction only when it is not zero and without trailing zeros: the one
// canonical text of an instant.
func appendRFC3339(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendInt(b, year, 4)
	b = append(b, '-')
	b = appendInt(b, int(month), 2)
	b = append(b, '-')
	b = appendInt(b, day, 2)
	b = append(b, 'T')
	b = appendInt(b, hour, 2)
	b = append(b, ':')
	b = appendInt(b, minute, 2)
	b = append(b, ':')
	b = appendInt(b, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		b = append(b, '.')
		b = appendInt(b, ns, digits)
	}
	return append(b, 'Z')
}

// appendInt appends a non-negative v zero-padded to width digits.
func appendInt(b []byte, v, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || width > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	return append(b, buf[i:]...)
}
