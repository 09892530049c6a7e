package record

// Field is one field of the contract's table (CONTRACT.md section 2): what
// a FieldSet holds.
type Field uint8

// The fields, in the contract table's order.
const (
	FieldTenantID            Field = fTenantID
	FieldAccountPeriod       Field = fAccountPeriod
	FieldRecordID            Field = fRecordID
	FieldKind                Field = fKind
	FieldSubject             Field = fSubject
	FieldOccurredAt          Field = fOccurredAt
	FieldAmount              Field = fAmount
	FieldCurrency            Field = fCurrency
	FieldMeter               Field = fMeter
	FieldQuantity            Field = fQuantity
	FieldUnit                Field = fUnit
	FieldFinalizationVersion Field = fFinalizationVersion
	FieldCorrects            Field = fCorrects
	FieldCorrectsPeriod      Field = fCorrectsPeriod
	FieldHoldID              Field = fHoldID
	FieldHoldPeriod          Field = fHoldPeriod
	FieldExpiresAt           Field = fExpiresAt
	FieldSource              Field = fSource
	FieldAttributes          Field = fAttributes
)

// FieldSet is a set of Fields, one bit each.
type FieldSet uint32

// Has reports whether f is in s.
func (s FieldSet) Has(f Field) bool { return s&(1<<f) != 0 }

// Fields is the set of fields a record of kind k takes, required or
// optional, provenance (source, attributes) included: the contract's table.
func (k Kind) Fields() FieldSet {
	required, optional := kindFields(k)
	return FieldSet(required | optional)
}

// FlatFields returns the members of a JSON object read with the input
// grammar (duplicate keys refused, nothing after the object): strings
// decoded, numbers as their JSON text, objects and arrays as their raw
// text. It serves the canonical form's readers (analysts' diffs), not
// validation; its error is a *DecodeError.
func FlatFields(object []byte) (map[string]string, error) {
	sc := scanner{s: string(object)}
	m := make(map[string]string, 16)
	err := sc.object("", func(key string) *DecodeError {
		v, err := sc.value(key, 1)
		if err == nil {
			m[key] = v.text
		}
		return err
	})
	if err == nil {
		sc.skipSpace()
		if sc.pos != len(sc.s) {
			err = sc.syntaxError("unexpected data after the JSON object")
		}
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}
