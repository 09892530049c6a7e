package settle

// CaseListPlan exposes the listing's EXPLAIN to the plan test.
var CaseListPlan = (*Store).caseListPlan

// DecodeHeadersFast exposes the reflection-free headers decoder to its
// equivalence test.
var DecodeHeadersFast = decodeHeadersFast
