package record

import (
	"strings"
	"unicode/utf8"
)

// binaryCloudEvent returns the CloudEvents attributes carried in ce_
// headers, or nil when there is no ce_specversion header (not binary mode).
func binaryCloudEvent(headers []Header) (*slots, *DecodeError) {
	isCE := false
	for _, h := range headers {
		if h.Key == "ce_specversion" {
			isCE = true
			break
		}
	}
	if !isCE {
		return nil, nil
	}
	var ce slots
	for _, h := range headers {
		var slot int
		switch {
		case h.Key == "content-type":
			slot = cDataContentType
		case strings.HasPrefix(h.Key, "ce_"):
			switch h.Key[3:] {
			case "specversion", "id", "type", "subject", "time", "source", "tenantid":
				slot = slotOf(h.Key[3:])
			default:
				continue // other attributes and extensions are ignored
			}
		default:
			continue
		}
		if ce[slot].kind != kindAbsent {
			return nil, fieldError(h.Key, "header appears more than once; a CloudEvents attribute has one value")
		}
		var flags uint8
		if !utf8.Valid(h.Value) {
			flags = flagBadUTF8
		}
		ce[slot] = value{kind: kindString, flags: flags, text: string(h.Value)}
	}
	if err := checkCloudEvent(&ce, "ce_", "content-type"); err != nil {
		return nil, err
	}
	return &ce, nil
}

// checkCloudEvent checks the attributes that say how to read the event.
func checkCloudEvent(ce *slots, prefix, contentTypeName string) *DecodeError {
	if v := ce[cSpecVersion]; v.kind != kindString || v.text != "1.0" {
		return fieldError(prefix+"specversion", "%s must be \"1.0\"; only CloudEvents 1.0 is supported", describeValue(v))
	}
	if v := ce[cDataContentType]; v.kind != kindAbsent && v.kind != kindNull {
		mt := v.text
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		mt = strings.ToLower(strings.TrimSpace(mt))
		if v.kind != kindString || (mt != "application/json" && mt != "text/json" && !strings.HasSuffix(mt, "+json")) {
			return fieldError(contentTypeName, "%s is not JSON; the event's data must be a JSON object (application/json)", describeValue(v))
		}
	}
	return nil
}

// structuredCloudEvent reads a structured-mode event: attributes at the top,
// record fields in data.
func structuredCloudEvent(fs *fields, top *slots) *DecodeError {
	if err := checkCloudEvent(top, "", "datacontenttype"); err != nil {
		return err
	}
	if top[cDataBase64].kind != kindAbsent {
		return fieldError("data_base64", "binary data is not supported; send the record's fields as a JSON object in data")
	}
	data := top[cData]
	if data.kind == kindAbsent {
		return fieldError("data", "required: a CloudEvent carries the record's fields in data")
	}
	if data.kind != kindObject {
		return fieldError("data", "must be a JSON object, not %s", data.kind.describe())
	}
	var inner slots
	if err := scanTop(data.text, &inner); err != nil {
		return err // cannot happen: data was validated with the event
	}
	copy(fs.v[:], inner[:nRecordFields])
	return mergeCloudEvent(fs, top, "")
}

// mergeCloudEvent puts the CloudEvents attributes in place of the record
// fields they map to. A data field that repeats an attribute must agree with
// it: silently preferring one would hide a producer's bug.
func mergeCloudEvent(fs *fields, ce *slots, prefix string) *DecodeError {
	for _, m := range ceMapping {
		av := ce[m.ce]
		if av.kind == kindAbsent || av.kind == kindNull {
			if !fs.present(m.field) {
				fs.name[m.field] = prefix + m.name // blame the attribute producers are meant to set
			}
			continue
		}
		if m.field == fKind && av.kind == kindString {
			av.text = kindFromType(av.text)
		}
		dv := fs.v[m.field]
		if dv.kind != kindAbsent && dv.kind != kindNull && (dv.kind != av.kind || dv.text != av.text) && !sameInstant(m.field, dv, av) {
			return fieldError(prefix+m.name, "%s disagrees with data field %s %s", describeValue(ce[m.ce]), fieldNames[m.field], describeValue(dv))
		}
		fs.v[m.field] = av
		fs.name[m.field] = prefix + m.name
	}
	return nil
}

// sameInstant tells whether two times for occurred_at name the same
// instant in other words (an offset, fraction digits), as the canonical
// form, which holds the time in UTC, would have them; a time that does not
// parse is left to validation.
func sameInstant(field int, a, b value) bool {
	if field != fOccurredAt || a.kind != kindString || b.kind != kindString {
		return false
	}
	ta, ma := parseRFC3339(a.text)
	tb, mb := parseRFC3339(b.text)
	return ma == "" && mb == "" && ta.Equal(tb)
}

// kindFromType maps a CloudEvents type to a kind: the kind itself or a name
// ending in ".<kind>". Anything else is returned unchanged, to be refused by
// kind validation with the producer's own text.
func kindFromType(t string) string {
	if validKind(t) {
		return t
	}
	if i := strings.LastIndexByte(t, '.'); i >= 0 && validKind(t[i+1:]) {
		return t[i+1:]
	}
	return t
}

// describeValue renders a value for an error message.
func describeValue(v value) string {
	switch v.kind {
	case kindString:
		return quote(v.text)
	case kindAbsent:
		return "absent"
	}
	return quote(v.text) + " (" + v.kind.describe() + ")"
}
