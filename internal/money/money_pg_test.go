package money_test

// A differential test of package money against PostgreSQL numeric, which
// stores every balance: thousands of random amounts (up to 18 integer and 9
// fraction digits, zeros, exponent forms), their sums, differences,
// negations, comparisons and a running balance, computed by both and
// required to agree digit for digit (String against trim_scale(x)::text);
// and each amount sent to PostgreSQL as Dec.NumericValue reads back as
// String renders it, untrimmed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle/settletest"
)

func randDec(rng *rand.Rand) string {
	digits := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	s := digits(1 + rng.IntN(18))
	switch rng.IntN(4) {
	case 0: // integer
	case 1:
		s += "." + digits(1+rng.IntN(9))
	case 2: // exponent form, still inside 18.9 digits after normalising
		s = digits(1+rng.IntN(6)) + "." + digits(1+rng.IntN(3)) + fmt.Sprintf("E%+d", rng.IntN(13)-6)
	case 3:
		s = "0." + digits(1+rng.IntN(9))
	}
	if rng.IntN(3) == 0 {
		s = "-" + s
	}
	return s
}

// TestMoneyAgreesWithPostgresNumeric: over 5,000 random pairs (up to 18.9
// digits, signs, exponent forms, zeros, extremes), a+b, a-b, -a, cmp, sign
// and a running sum equal PostgreSQL's numeric digit for digit.
func TestMoneyAgreesWithPostgresNumeric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatalf("connect to %s: %v", settletest.ServerURL(), err)
	}
	defer conn.Close(ctx)
	const n = 5000
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	as, bs := make([]string, n), make([]string, n)
	for i := range as {
		as[i], bs[i] = randDec(rng), randDec(rng)
	}
	as[0], bs[0] = "0", "0.000000000"
	as[1], bs[1] = "999999999999999999.999999999", "0.000000001"
	as[2], as[3], as[4] = "-0.000", "1000.500", "1E+3"
	rows, err := conn.Query(ctx, `
		SELECT trim_scale(a + b)::text, trim_scale(a - b)::text, trim_scale(-a)::text, sign(a - b)::int, sign(a)::int,
		       trim_scale(sum(a) OVER (ORDER BY i))::text, d::text
		  FROM unnest($1::numeric[], $2::numeric[], $3::numeric[]) WITH ORDINALITY AS x(a, b, d, i) ORDER BY i`, as, bs, decs(as))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var (
		i       int
		running money.Dec
		bad     int
	)
	for rows.Next() {
		var sum, diff, neg, running2, sent string
		var cmp, sign int
		if err := rows.Scan(&sum, &diff, &neg, &cmp, &sign, &running2, &sent); err != nil {
			t.Fatal(err)
		}
		a, b := money.MustParse(as[i]), money.MustParse(bs[i])
		running = running.Add(a)
		for _, c := range []struct{ what, got, want string }{
			{"a+b", a.Add(b).String(), sum},
			{"a-b", a.Sub(b).String(), diff},
			{"-a", a.Neg().String(), neg},
			{"cmp", fmt.Sprint(a.Cmp(b)), fmt.Sprint(cmp)},
			{"sign", fmt.Sprint(a.Sign()), fmt.Sprint(sign)},
			{"running sum", running.String(), running2},
			{"a sent as NumericValue", a.String(), sent},
		} {
			if c.got != c.want {
				bad++
				if bad <= 10 {
					t.Errorf("a=%s b=%s: %s = %s in Go, %s in PostgreSQL", as[i], bs[i], c.what, c.got, c.want)
				}
			}
		}
		i++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("compared %d values, want %d", i, n)
	}
	t.Logf("%d random pairs, 7 operations each: %d disagreements", n, bad)
}

// decs parses ss, for pgx to send as numerics through Dec.NumericValue.
func decs(ss []string) []money.Dec {
	out := make([]money.Dec, len(ss))
	for i, s := range ss {
		out[i] = money.MustParse(s)
	}
	return out
}
