package settle

// CopyRowsMin exposes the batch size from which rows are written with COPY
// to TestSmallAndLargeBatchesWriteTheSameRows, which must settle on both
// sides of it.
const CopyRowsMin = copyRowsMin

// DeliveryProbes is how many input records' coordinates the store's
// batches probed for earlier deliveries.
func (s *Store) DeliveryProbes() int64 { return s.probed.Load() }

// AccountKept says whether the store keeps the state of an account, and
// whether it reads the account fresh for a while (contended).
func (s *Store) AccountKept(tenant, subject, currency string) (kept, contended bool) {
	c := &s.accounts
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[accountKey{tenant, subject, currency}]
	if !ok {
		return false, false
	}
	_, kept = c.kept[id]
	_, contended = c.contended[id]
	return kept, contended
}
