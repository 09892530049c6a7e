package record

// Field slots. The record fields come first, in the order they are
// validated (the contract table's order), so that a record with several
// faults always reports the same one.
const (
	fTenantID = iota
	fAccountPeriod
	fRecordID
	fKind
	fSubject
	fOccurredAt
	fAmount
	fCurrency
	fMeter
	fQuantity
	fUnit
	fFinalizationVersion
	fCorrects
	fCorrectsPeriod
	fHoldID
	fHoldPeriod
	fExpiresAt
	fSource
	fAttributes
	nRecordFields
)

// CloudEvents attributes that are not also record field names (subject and
// source are) have slots after the record fields.
const (
	cSpecVersion = nRecordFields + iota
	cID
	cType
	cTime
	cTenantID
	cData
	cDataBase64
	cDataContentType
	nSlots
)

var fieldNames = [nRecordFields]string{
	"tenant_id", "account_period", "record_id", "kind", "subject", "occurred_at",
	"amount", "currency", "meter", "quantity", "unit", "finalization_version",
	"corrects", "corrects_period", "hold_id", "hold_period", "expires_at", "source", "attributes",
}

// slotOf maps a top-level key to its slot, or -1 for keys that are ignored.
func slotOf(key string) int {
	switch key {
	case "tenant_id":
		return fTenantID
	case "account_period":
		return fAccountPeriod
	case "record_id":
		return fRecordID
	case "kind":
		return fKind
	case "subject":
		return fSubject
	case "occurred_at":
		return fOccurredAt
	case "amount":
		return fAmount
	case "currency":
		return fCurrency
	case "meter":
		return fMeter
	case "quantity":
		return fQuantity
	case "unit":
		return fUnit
	case "finalization_version":
		return fFinalizationVersion
	case "corrects":
		return fCorrects
	case "corrects_period":
		return fCorrectsPeriod
	case "hold_id":
		return fHoldID
	case "hold_period":
		return fHoldPeriod
	case "expires_at":
		return fExpiresAt
	case "source":
		return fSource
	case "attributes":
		return fAttributes
	case "specversion":
		return cSpecVersion
	case "id":
		return cID
	case "type":
		return cType
	case "time":
		return cTime
	case "tenantid":
		return cTenantID
	case "data":
		return cData
	case "data_base64":
		return cDataBase64
	case "datacontenttype":
		return cDataContentType
	}
	return -1
}

// ceMapping is how CloudEvents attributes become record fields.
var ceMapping = [...]struct {
	ce, field int
	name      string // the attribute's name, without the ce_ header prefix
}{
	{cTenantID, fTenantID, "tenantid"},
	{cID, fRecordID, "id"},
	{cType, fKind, "type"},
	{fSubject, fSubject, "subject"},
	{cTime, fOccurredAt, "time"},
	{fSource, fSource, "source"},
}

// slots holds the scanned values of one JSON object, by slot.
type slots [nSlots]value

// fields is what validation reads: one value per record field and the name
// to blame it on (a CloudEvents attribute's name when it came from one).
type fields struct {
	v    [nRecordFields]value
	name [nRecordFields]string
}
