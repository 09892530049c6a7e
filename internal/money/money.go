// Package money is exact decimal arithmetic for amounts and balances. It never
// rounds: an inexact result is a defect and panics.
package money

import (
	"fmt"
	"math/big"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5/pgtype"
)

// decCtx does exact decimal arithmetic: amounts have at most 27 digits and
// balances grow by sums of them, far inside 100 digits. Any inexact result
// is an error, never a rounding.
var decCtx = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(100)
	c.Traps = apd.DefaultTraps | apd.Inexact | apd.Rounded
	return c
}()

// Dec is an exact decimal value; the zero value is 0.
type Dec struct{ d apd.Decimal }

// Parse reads a decimal string exactly ("" is 0).
func Parse(s string) (Dec, error) {
	var v Dec
	if s == "" {
		return v, nil
	}
	if _, _, err := v.d.SetString(s); err != nil {
		return v, fmt.Errorf("decimal %q: %w", s, err)
	}
	return v, nil
}

// MustParse is Parse for values already validated; it panics on bad input.
func MustParse(s string) Dec {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Add returns a+b.
func (a Dec) Add(b Dec) Dec {
	var r Dec
	if _, err := decCtx.Add(&r.d, &a.d, &b.d); err != nil {
		panic(fmt.Errorf("money: %s + %s: %w", a, b, err))
	}
	return r
}

// Sub returns a-b.
func (a Dec) Sub(b Dec) Dec {
	var r Dec
	if _, err := decCtx.Sub(&r.d, &a.d, &b.d); err != nil {
		panic(fmt.Errorf("money: %s - %s: %w", a, b, err))
	}
	return r
}

// Neg returns -a.
func (a Dec) Neg() Dec {
	var r Dec
	r.d.Neg(&a.d)
	return r
}

// Cmp compares a and b: -1, 0 or +1.
func (a Dec) Cmp(b Dec) int { return a.d.Cmp(&b.d) }

// Sign is -1, 0 or +1.
func (a Dec) Sign() int { return a.d.Sign() }

// IsZero reports a == 0.
func (a Dec) IsZero() bool { return a.d.IsZero() }

// String renders the exact value without exponent and without trailing
// fraction zeros ("-40", "0.5", "0").
func (a Dec) String() string {
	var r apd.Decimal
	r.Reduce(&a.d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

// NumericValue is a as a PostgreSQL numeric, reduced as String renders it
// (no trailing fraction zeros), built from the digits without a round trip
// through text. It makes Dec a pgtype.NumericValuer, so pgx writes it to a
// numeric column or parameter as it is.
func (a Dec) NumericValue() (pgtype.Numeric, error) {
	var r apd.Decimal
	r.Reduce(&a.d)
	if r.IsZero() {
		return pgtype.Numeric{Int: new(big.Int), Valid: true}, nil
	}
	i := r.Coeff.MathBigInt()
	if r.Negative {
		i.Neg(i)
	}
	return pgtype.Numeric{Int: i, Exp: r.Exponent, Valid: true}, nil
}
