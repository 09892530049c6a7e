package settle

import "github.com/settlehq/settle/settle/internal/state"

// CopyRowsMin exposes the batch size from which rows are written with COPY
// to TestSmallAndLargeBatchesWriteTheSameRows, which must settle on both
// sides of it.
const CopyRowsMin = state.CopyRowsMin

// DeliveryProbes is how many input records' coordinates the store's
// batches probed for earlier deliveries.
func (s *Store) DeliveryProbes() int64 { return s.shared.Probed.Load() }

// AccountKept says whether the store keeps the state of an account, and
// whether it reads the account fresh for a while (contended).
func (s *Store) AccountKept(tenant, subject, currency string) (kept, contended bool) {
	c := &s.shared.Accounts
	c.Mu.RLock()
	defer c.Mu.RUnlock()
	id, ok := c.IDs[state.AccountKey{Tenant: tenant, Subject: subject, Currency: currency}]
	if !ok {
		return false, false
	}
	_, kept = c.Kept[id]
	_, contended = c.Contended[id]
	return kept, contended
}
