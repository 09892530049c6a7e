package reconcile

// SettledScanPlan is the planner setting a settled-identities page runs
// under, for the test that explains the page as the check runs it.
const SettledScanPlan = settledScanPlan
