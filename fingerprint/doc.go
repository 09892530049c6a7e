// Package fingerprint takes a decoded record (package record) to its
// versioned canonical form and that form's hash: what tells a retry of a
// record from a conflicting one. It owns the canonical form's versions
// (CanonicalAt), its golden vectors (testdata/) and its fuzz target, the
// readers analysts' diffs use (CanonicalFields, Diff), and Prepare, the
// decode-and-fingerprint step every record takes on its way in.
//
// It sits above record, which decodes and validates and knows nothing of
// canonical forms. It knows nothing of Kafka, SQL or money movements. A
// change to the bytes Canonical writes for any record must add a version,
// never edit one: stored fingerprints keep the version they were made with.
package fingerprint
