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
	dt, msg := parseDateTime(s)
	if msg != "" {
		return time.Time{}, msg
	}
	nsec, i, msg := parseFraction(s, len("2006-01-02T15:04:05"))
	if msg != "" {
		return time.Time{}, msg
	}
	offset, i, msg := parseOffset(s, i)
	if msg != "" {
		return time.Time{}, msg
	}
	if i != len(s) {
		return time.Time{}, fmt.Sprintf("unexpected %s after the time", quote(s[i:]))
	}
	t := time.Date(dt.year, time.Month(dt.month), dt.day, dt.hour, dt.minute, dt.sec, nsec, time.UTC).Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, "outside years 0000-9999 in UTC"
	}
	return t, ""
}

// dateTime is the YYYY-MM-DDTHH:MM:SS part of an RFC 3339 date-time.
type dateTime struct {
	year, month, day, hour, minute, sec int
}

// parseDateTime reads and range-checks s's first 19 characters.
func parseDateTime(s string) (dateTime, string) {
	const form = "the form is YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)"
	if len(s) < len("2006-01-02T15:04:05") {
		return dateTime{}, form
	}
	var dt dateTime
	var ok1, ok2, ok3, ok4, ok5, ok6 bool
	dt.year, ok1 = digitsAt(s, 0, 4)
	dt.month, ok2 = digitsAt(s, 5, 2)
	dt.day, ok3 = digitsAt(s, 8, 2)
	dt.hour, ok4 = digitsAt(s, 11, 2)
	dt.minute, ok5 = digitsAt(s, 14, 2)
	dt.sec, ok6 = digitsAt(s, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return dateTime{}, form
	}
	switch {
	case dt.month < 1 || dt.month > 12:
		return dateTime{}, "month out of range"
	case dt.day < 1 || dt.day > daysIn(dt.year, dt.month):
		return dateTime{}, "day out of range"
	case dt.hour > 23:
		return dateTime{}, "hour out of range"
	case dt.minute > 59:
		return dateTime{}, "minute out of range"
	case dt.sec == 60:
		return dateTime{}, "leap seconds are not supported"
	case dt.sec > 59:
		return dateTime{}, "second out of range"
	}
	return dt, ""
}

// parseFraction reads the optional ".F" at s[i:] as nanoseconds and returns
// the index after it.
func parseFraction(s string, i int) (nsec, next int, msg string) {
	if i >= len(s) || s[i] != '.' {
		return 0, i, ""
	}
	i++
	j := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	n := i - j
	switch {
	case n == 0:
		return 0, i, "no digits after '.'"
	case n > 9:
		return 0, i, "more than 9 fraction digits (nanoseconds)"
	}
	nsec, _ = digitsAt(s, j, n)
	for ; n < 9; n++ {
		nsec *= 10
	}
	return nsec, i, ""
}

// parseOffset reads the time zone offset (Z or ±HH:MM) at s[i:] in seconds
// east of UTC and returns the index after it.
func parseOffset(s string, i int) (offset, next int, msg string) {
	if i >= len(s) {
		return 0, i, "missing time zone offset (Z or ±HH:MM)"
	}
	switch s[i] {
	case 'Z', 'z':
		return 0, i + 1, ""
	case '+', '-':
		if len(s)-i != 6 || s[i+3] != ':' {
			return 0, i, "time zone offset must be Z or ±HH:MM"
		}
		oh, ok1 := digitsAt(s, i+1, 2)
		om, ok2 := digitsAt(s, i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, i, "time zone offset out of range"
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
		return offset, i + 6, ""
	}
	return 0, i, "time zone offset must be Z or ±HH:MM"
}

// digitsAt reads the n decimal digits at s[i:] as a number; ok is false when
// one of them is not a digit.
func digitsAt(s string, i, n int) (v int, ok bool) {
	for _, c := range []byte(s[i : i+n]) {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
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
