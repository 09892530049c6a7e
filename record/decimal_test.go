package record

import (
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// TestNormalizeDecimal: every spelling of one amount (40, 40.0, 4E1,
// 400e-1, 0040.00) normalizes to one form; amounts past the integer or
// fraction digits allowed, negative, signed, empty or not ASCII digits are
// refused with what is wrong.
func TestNormalizeDecimal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		int, frc int
		want     string // "" when an error is expected
		errHas   string
	}{
		{"40", 18, 9, "40", ""},
		{"40.0", 18, 9, "40", ""},
		{"4E1", 18, 9, "40", ""},
		{"4.0e+1", 18, 9, "40", ""},
		{"400e-1", 18, 9, "40", ""},
		{"0040.00", 18, 9, "40", ""},
		{"0.50", 18, 9, "0.5", ""},
		{"0e5", 18, 9, "0", ""},
		{"0.000", 18, 9, "0", ""},
		{"000", 18, 9, "0", ""},
		{"0", 18, 9, "0", ""},
		{"1.0000000000", 18, 9, "1", ""},
		{"12.345e-5", 0, 0, "0.00012345", ""},
		{"12.345e1", 0, 0, "123.45", ""},
		{"12.345e3", 0, 0, "12345", ""},
		{"12.345e5", 0, 0, "1234500", ""},
		{"0.001e3", 0, 0, "1", ""},
		{"1e-0", 0, 0, "1", ""},
		{"999999999999999999.999999999", 18, 9, "999999999999999999.999999999", ""},
		{"0.0000000001e1", 18, 9, "0.000000001", ""},
		{"1e18", 18, 9, "", `"1e18" has more than 18 integer digits`},
		{"1e400", 18, 9, "", "more than 18 integer digits"},
		{"0.0000000001", 18, 9, "", `"0.0000000001" has more than 9 fraction digits`},
		{"1e999999999", 0, 0, "", "more than 1000 integer digits"},
		{"1e-999999999999999999999", 0, 0, "", "more than 1000 fraction digits"},
		{"0e999999999999999999999", 0, 0, "0", ""},
		{"-1", 0, 0, "", "is negative"},
		{"+1", 0, 0, "", "is not a decimal"},
		{"", 0, 0, "", "is not a decimal"},
		{"1.", 0, 0, "", "is not a decimal"},
		{".1", 0, 0, "", "is not a decimal"},
		{"1e", 0, 0, "", "is not a decimal"},
		{"1e+", 0, 0, "", "is not a decimal"},
		{"1_000", 0, 0, "", "is not a decimal"},
		{"Infinity", 0, 0, "", "is not a decimal"},
		{"١", 0, 0, "", "is not a decimal"}, // Arabic-Indic one: digits are ASCII only
	} {
		got, err := NormalizeDecimal(tc.in, tc.int, tc.frc)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("NormalizeDecimal(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.errHas)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeDecimal(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNormalizeDecimalDoesNotAllocateHugeResults(t *testing.T) {
	// Not parallel: it reads the process's allocation counter.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := NormalizeDecimal("1e999999999", 0, 0); err == nil {
			t.Fatal("accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 100<<10 {
		t.Errorf("refusing a huge exponent 100 times allocated %d bytes", n)
	}
}

// FuzzNormalizeDecimal checks that the normal form is exact (numerically
// equal to the input, by apd's arbitrary-precision arithmetic), is a fixed
// point, and has the promised shape.
func FuzzNormalizeDecimal(f *testing.F) {
	for _, s := range []string{"40", "40.0", "4E1", "4.0e+1", "400e-1", "0.50", "0e5", "1e18", "0.0000000001", "1e999999999", "00012.3400e-7", "9.99e2", "-1", "1.", ""} {
		f.Add(s, 18, 9)
		f.Add(s, 0, 0)
	}
	f.Fuzz(func(t *testing.T, s string, intMax, fracMax int) {
		n, err := NormalizeDecimal(s, intMax, fracMax)
		if err != nil {
			return
		}
		again, err := NormalizeDecimal(n, intMax, fracMax)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, n, again, err)
		}
		if n != "0" && (strings.HasPrefix(n, "0") && !strings.HasPrefix(n, "0.") || strings.ContainsAny(n, "eE+-") ||
			strings.Contains(n, ".") && strings.HasSuffix(n, "0")) {
			t.Fatalf("%q -> %q is not in normal form", s, n)
		}
		a, _, err := apd.NewFromString(s)
		if err != nil {
			// apd bounds exponents (±100000); an accepted value can only
			// have a larger one when its digits are all zero.
			if n != "0" {
				t.Fatalf("apd refuses %q that NormalizeDecimal accepted as %q: %v", s, n, err)
			}
			return
		}
		b, _, err := apd.NewFromString(n)
		if err != nil {
			t.Fatalf("apd refuses normal form %q: %v", n, err)
		}
		if a.Cmp(b) != 0 {
			t.Fatalf("%q -> %q changes the value", s, n)
		}
		ip, fp, _ := strings.Cut(n, ".")
		if ip == "0" {
			ip = ""
		}
		if intMax > 0 && intMax <= DecimalDigitsMax && len(ip) > intMax || len(ip) > DecimalDigitsMax {
			t.Fatalf("%q -> %q exceeds %d integer digits", s, n, intMax)
		}
		if fracMax > 0 && fracMax <= DecimalDigitsMax && len(fp) > fracMax || len(fp) > DecimalDigitsMax {
			t.Fatalf("%q -> %q exceeds %d fraction digits", s, n, fracMax)
		}
	})
}
