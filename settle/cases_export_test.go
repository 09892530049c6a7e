package settle

// CaseListPlan exposes the listing's EXPLAIN to the plan test.
var CaseListPlan = (*Store).caseListPlan
