package inspect

import (
	"errors"
	"testing"
)

// TestEditValue: an edit changes the named fields of the letter's JSON
// object and nothing else (each other value byte for byte, the order
// kept, a new field last), and refuses what it cannot apply.
func TestEditValue(t *testing.T) {
	edit := func(ss ...string) []FieldEdit {
		var out []FieldEdit
		for _, s := range ss {
			if s[0] == '-' {
				out = append(out, FieldEdit{Field: s[1:]})
				continue
			}
			e, err := ParseFieldEdit(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	const rec = `{"tenant_id":"acme", "amount":"four","n":12345678901234567890,"x":{"a": 1}}`
	for _, c := range []struct {
		name, value string
		edits       []FieldEdit
		want        string // "" = refused
		diff        int
	}{
		{"a string", rec, edit("amount=4"), `{"tenant_id":"acme","amount":"4","n":12345678901234567890,"x":{"a":1}}`, 1},
		{"JSON and a new field", rec, edit("n:=7", "unit=s"), `{"tenant_id":"acme","amount":"four","n":7,"x":{"a":1},"unit":"s"}`, 2},
		{"removed", rec, edit("-x"), `{"tenant_id":"acme","amount":"four","n":12345678901234567890}`, 1},
		{"no change", rec, edit("amount=four"), "", 0},
		{"twice", rec, edit("amount=1", "amount=2"), "", 0},
		{"not an object", `[1]`, edit("a=1"), "", 0},
		{"not JSON", `{"amount":`, edit("amount=1"), "", 0},
		{"a duplicated field", `{"amount":"1","amount":"2"}`, edit("amount=3"), "", 0},
	} {
		got, diff, err := EditValue([]byte(c.value), c.edits)
		switch {
		case c.want == "" && !errors.Is(err, ErrBadEdit):
			t.Errorf("%s: %s, %v: want ErrBadEdit", c.name, got, err)
		case c.want != "" && (err != nil || string(got) != c.want || len(diff) != c.diff):
			t.Errorf("%s: %s %+v %v, want %s with %d changes", c.name, got, diff, err, c.want, c.diff)
		}
	}
	if _, err := ParseFieldEdit("n:=not json"); !errors.Is(err, ErrBadEdit) {
		t.Errorf("n:=not json: %v", err)
	}
}
