package inspect

// CaseListPlan exposes the listing's EXPLAIN to the plan test.
var CaseListPlan = (*Store).caseListPlan

// ReadOnlyTx exposes the read side's transaction to the test that proves
// it cannot write.
var ReadOnlyTx = (*Store).readOnly
