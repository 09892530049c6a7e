package record

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file is a small JSON scanner written for the decoder's needs, which
// encoding/json does not meet: duplicate keys must be refused at every depth,
// JSON numbers must be seen as text (never floats), and a 300-byte record
// must decode in a few microseconds. It works on a string so that unescaped
// strings are substrings of the one copy of the input, without allocating.

// depthMax bounds the nesting of objects and arrays, so that a hostile record
// cannot exhaust the stack.
const depthMax = 128

// valueKind is the JSON type of a scanned value.
type valueKind uint8

const (
	kindAbsent valueKind = iota // the key was not present
	kindString
	kindNumber
	kindObject
	kindArray
	kindBool
	kindNull
)

// describe names a JSON type for error messages ("not a JSON number").
func (k valueKind) describe() string {
	switch k {
	case kindString:
		return "a JSON string"
	case kindNumber:
		return "a JSON number"
	case kindObject:
		return "a JSON object"
	case kindArray:
		return "a JSON array"
	case kindBool:
		return "a JSON boolean"
	case kindNull:
		return "null"
	}
	return "absent"
}

// String flags: facts about scanned strings that some fields must refuse
// although they are valid JSON.
const (
	flagBadUTF8 uint8 = 1 << iota // invalid UTF-8 bytes or a lone surrogate escape
	flagNUL                       // a \u0000 escape
)

// value is one scanned JSON value. For a string, text is the decoded string;
// for any other kind it is the raw JSON text.
type value struct {
	kind  valueKind
	flags uint8 // string flags of this value and, for containers, of every string inside
	text  string
}

type scanner struct {
	s   string
	pos int
}

// syntaxError reports invalid JSON at the scanner's position.
func (sc *scanner) syntaxError(what string) *DecodeError {
	if sc.pos >= len(sc.s) {
		return &DecodeError{Reason: ReasonInvalidJSON, Field: "record", Msg: fmt.Sprintf("invalid JSON: %s at end of input (%d bytes)", what, len(sc.s))}
	}
	return &DecodeError{Reason: ReasonInvalidJSON, Field: "record", Msg: fmt.Sprintf("invalid JSON at byte %d: %s", sc.pos, what)}
}

func (sc *scanner) skipSpace() {
	for sc.pos < len(sc.s) {
		switch sc.s[sc.pos] {
		case ' ', '\t', '\n', '\r':
			sc.pos++
		default:
			return
		}
	}
}

// keySet detects duplicate keys in one object. Records have a few dozen keys
// at most, so a linear scan over a small array beats a map until it
// overflows.
type keySet struct {
	small [16]string
	n     int
	big   map[string]struct{}
}

// add records key and reports whether it was new.
func (ks *keySet) add(key string) bool {
	if ks.big != nil {
		if _, dup := ks.big[key]; dup {
			return false
		}
		ks.big[key] = struct{}{}
		return true
	}
	for _, k := range ks.small[:ks.n] {
		if k == key {
			return false
		}
	}
	if ks.n < len(ks.small) {
		ks.small[ks.n] = key
		ks.n++
		return true
	}
	ks.big = make(map[string]struct{}, 2*len(ks.small))
	for _, k := range ks.small {
		ks.big[k] = struct{}{}
	}
	ks.big[key] = struct{}{}
	return true
}

func duplicateKey(key, where string) *DecodeError {
	msg := "duplicate key " + quote(key)
	if where != "" {
		msg += " inside " + quote(where)
	}
	return &DecodeError{Reason: ReasonInvalidJSON, Field: "record", Msg: msg + "; JSON keys must be unique"}
}

// object scans the object at the scanner's position, calling fn for each
// member with the scanner positioned at the member's value; fn must consume
// that value. where names the enclosing top-level key for error messages.
func (sc *scanner) object(where string, fn func(key string) *DecodeError) *DecodeError {
	sc.skipSpace()
	if sc.pos >= len(sc.s) || sc.s[sc.pos] != '{' {
		return sc.syntaxError("expected '{'")
	}
	sc.pos++
	var keys keySet
	sc.skipSpace()
	if sc.pos < len(sc.s) && sc.s[sc.pos] == '}' {
		sc.pos++
		return nil
	}
	for {
		sc.skipSpace()
		if sc.pos >= len(sc.s) || sc.s[sc.pos] != '"' {
			return sc.syntaxError("expected a string key")
		}
		key, _, err := sc.str()
		if err != nil {
			return err
		}
		if !keys.add(key) {
			return duplicateKey(key, where)
		}
		sc.skipSpace()
		if sc.pos >= len(sc.s) || sc.s[sc.pos] != ':' {
			return sc.syntaxError("expected ':' after key")
		}
		sc.pos++
		if err := fn(key); err != nil {
			return err
		}
		sc.skipSpace()
		if sc.pos >= len(sc.s) {
			return sc.syntaxError("unterminated object")
		}
		switch sc.s[sc.pos] {
		case ',':
			sc.pos++
		case '}':
			sc.pos++
			return nil
		default:
			return sc.syntaxError("expected ',' or '}' after object member")
		}
	}
}

// value scans any JSON value. Objects and arrays are validated in full
// (duplicate keys included) and returned as their raw text.
func (sc *scanner) value(where string, depth int) (value, *DecodeError) {
	sc.skipSpace()
	if sc.pos >= len(sc.s) {
		return value{}, sc.syntaxError("expected a value")
	}
	switch c := sc.s[sc.pos]; {
	case c == '"':
		s, flags, err := sc.str()
		return value{kind: kindString, flags: flags, text: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		start := sc.pos
		if err := sc.number(); err != nil {
			return value{}, err
		}
		return value{kind: kindNumber, text: sc.s[start:sc.pos]}, nil
	case c == '{' || c == '[':
		if depth >= depthMax {
			return value{}, sc.syntaxError(fmt.Sprintf("nested more than %d levels deep", depthMax))
		}
		start := sc.pos
		var flags uint8
		var err *DecodeError
		if c == '{' {
			err = sc.object(where, func(string) *DecodeError {
				v, err := sc.value(where, depth+1)
				flags |= v.flags
				return err
			})
		} else {
			flags, err = sc.array(where, depth)
		}
		kind := kindObject
		if c == '[' {
			kind = kindArray
		}
		return value{kind: kind, flags: flags, text: sc.s[start:sc.pos]}, err
	case c == 't':
		return sc.literal("true", kindBool)
	case c == 'f':
		return sc.literal("false", kindBool)
	case c == 'n':
		return sc.literal("null", kindNull)
	}
	return value{}, sc.syntaxError(fmt.Sprintf("unexpected %s", quote(sc.s[sc.pos:min(sc.pos+1, len(sc.s))])))
}

func (sc *scanner) array(where string, depth int) (uint8, *DecodeError) {
	sc.pos++ // '['
	var flags uint8
	sc.skipSpace()
	if sc.pos < len(sc.s) && sc.s[sc.pos] == ']' {
		sc.pos++
		return 0, nil
	}
	for {
		v, err := sc.value(where, depth+1)
		if err != nil {
			return 0, err
		}
		flags |= v.flags
		sc.skipSpace()
		if sc.pos >= len(sc.s) {
			return 0, sc.syntaxError("unterminated array")
		}
		switch sc.s[sc.pos] {
		case ',':
			sc.pos++
		case ']':
			sc.pos++
			return flags, nil
		default:
			return 0, sc.syntaxError("expected ',' or ']' after array element")
		}
	}
}

func (sc *scanner) literal(lit string, kind valueKind) (value, *DecodeError) {
	if !strings.HasPrefix(sc.s[sc.pos:], lit) {
		return value{}, sc.syntaxError("invalid literal, expected " + lit)
	}
	sc.pos += len(lit)
	return value{kind: kind, text: lit}, nil
}

// number scans -?(0|[1-9]D*)(.D+)?([eE][+-]?D+)?.
func (sc *scanner) number() *DecodeError {
	s := sc.s
	i := sc.pos
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		sc.pos = i
		return sc.syntaxError("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == j {
			sc.pos = i
			return sc.syntaxError("invalid number: no digits after '.'")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == j {
			sc.pos = i
			return sc.syntaxError("invalid number: no digits in exponent")
		}
	}
	sc.pos = i
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// str scans a string at the scanner's position (a '"'). Strings without
// escapes are returned as substrings of the input.
func (sc *scanner) str() (string, uint8, *DecodeError) {
	s := sc.s
	start := sc.pos + 1
	var flags uint8
	for i := start; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			sc.pos = i + 1
			return s[start:i], flags, nil
		case c == '\\':
			return sc.strEscaped(start, i, flags)
		case c < 0x20:
			sc.pos = i
			return "", 0, sc.syntaxError(fmt.Sprintf("control character %#02x in string; it must be escaped", c))
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				flags |= flagBadUTF8
			}
			i += size
		}
	}
	sc.pos = len(s)
	return "", 0, sc.syntaxError("unterminated string")
}

// strEscaped finishes a string that contains escapes: s[start:i] has been
// scanned and s[i] is the first backslash.
func (sc *scanner) strEscaped(start, i int, flags uint8) (string, uint8, *DecodeError) {
	s := sc.s
	var b strings.Builder
	b.Grow(i - start + 16)
	b.WriteString(s[start:i])
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			sc.pos = i + 1
			return b.String(), flags, nil
		case c < 0x20:
			sc.pos = i
			return "", 0, sc.syntaxError(fmt.Sprintf("control character %#02x in string; it must be escaped", c))
		case c != '\\':
			b.WriteByte(c)
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && size == 1 {
					flags |= flagBadUTF8
				}
				b.WriteString(s[i+1 : i+size])
				i += size
				continue
			}
			i++
			continue
		}
		// A backslash.
		if i+1 >= len(s) {
			sc.pos = len(s)
			return "", 0, sc.syntaxError("unterminated string")
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b.WriteByte(s[i+1])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			next, f, ok := writeUnicodeEscape(&b, s, i)
			if !ok {
				sc.pos = i
				return "", 0, sc.syntaxError(`invalid \u escape`)
			}
			i, flags = next, flags|f
			continue
		default:
			sc.pos = i
			return "", 0, sc.syntaxError(fmt.Sprintf("invalid escape %s", quote(s[i:i+2])))
		}
		i += 2
	}
	sc.pos = len(s)
	return "", 0, sc.syntaxError("unterminated string")
}

// writeUnicodeEscape writes the \uXXXX escape at s[i:] to b, joined with the
// escaped low surrogate that must follow a high one, and returns the index
// after it; ok is false when the escape is malformed. A lone surrogate is
// written as U+FFFD and flagged flagBadUTF8, an escaped NUL flagged flagNUL.
func writeUnicodeEscape(b *strings.Builder, s string, i int) (next int, flags uint8, ok bool) {
	r, ok := hex4(s, i+2)
	if !ok {
		return i, 0, false
	}
	i += 6
	if r == 0 {
		flags |= flagNUL
	}
	if r >= 0xD800 && r < 0xDC00 {
		if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
			if lo, ok := hex4(s, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
				b.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
				return i + 6, flags, true
			}
		}
		b.WriteRune(utf8.RuneError)
		return i, flags | flagBadUTF8, true
	}
	if r >= 0xDC00 && r < 0xE000 {
		b.WriteRune(utf8.RuneError)
		return i, flags | flagBadUTF8, true
	}
	b.WriteRune(r)
	return i, flags, true
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
