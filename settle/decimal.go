package settle

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// decCtx does exact decimal arithmetic: amounts have at most 27 digits and
// balances grow by sums of them, far inside 100 digits. Any inexact result
// is an error, never a rounding.
var decCtx = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(100)
	c.Traps = apd.DefaultTraps | apd.Inexact | apd.Rounded
	return c
}()

// dec is an exact decimal value.
type dec struct{ d apd.Decimal }

func parseDec(s string) (dec, error) {
	var v dec
	if s == "" {
		return v, nil
	}
	if _, _, err := v.d.SetString(s); err != nil {
		return v, fmt.Errorf("decimal %q: %w", s, err)
	}
	return v, nil
}

func mustDec(s string) dec {
	v, err := parseDec(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (a dec) add(b dec) dec {
	var r dec
	if _, err := decCtx.Add(&r.d, &a.d, &b.d); err != nil {
		panic(fmt.Errorf("settle: decimal %s + %s: %w", a, b, err))
	}
	return r
}

func (a dec) sub(b dec) dec {
	var r dec
	if _, err := decCtx.Sub(&r.d, &a.d, &b.d); err != nil {
		panic(fmt.Errorf("settle: decimal %s - %s: %w", a, b, err))
	}
	return r
}

func (a dec) neg() dec {
	var r dec
	r.d.Neg(&a.d)
	return r
}

func (a dec) cmp(b dec) int { return a.d.Cmp(&b.d) }
func (a dec) sign() int     { return a.d.Sign() }
func (a dec) isZero() bool  { return a.d.IsZero() }

func minDec(a, b dec) dec {
	if a.cmp(b) <= 0 {
		return a
	}
	return b
}

// String renders the exact value without exponent and without trailing
// fraction zeros ("-40", "0.5", "0").
func (a dec) String() string {
	var r apd.Decimal
	r.Reduce(&a.d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}
