package record

import "encoding/json"

// Written is what a record's value says of its identity when it is a JSON
// object naming tenant_id, account_period, record_id and kind as strings;
// a field it does not say so is "". It is what the producer wrote, not a
// validated identity: the dead-letter path reads it from a record that did
// not decode, so that its letter and its result say whose it was.
func Written(value []byte) Identity {
	var f struct {
		Tenant any `json:"tenant_id"`
		Period any `json:"account_period"`
		Record any `json:"record_id"`
		Kind   any `json:"kind"`
	}
	if json.Unmarshal(value, &f) != nil {
		return Identity{}
	}
	s := func(v any) string { t, _ := v.(string); return t }
	return Identity{TenantID: s(f.Tenant), AccountPeriod: s(f.Period), RecordID: s(f.Record), Operation: Kind(s(f.Kind))}
}
