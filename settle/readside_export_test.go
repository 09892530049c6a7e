package settle

// ReadOnlyTx exposes the read side's transaction to the test that proves
// it cannot write.
var ReadOnlyTx = (*Store).readOnly
