package settle

// CopyRowsMin exposes the batch size from which rows are written with COPY
// to TestSmallAndLargeBatchesWriteTheSameRows, which must settle on both
// sides of it.
const CopyRowsMin = copyRowsMin

// DeliveryProbes is how many input records' coordinates the store's
// batches probed for earlier deliveries.
func (s *Store) DeliveryProbes() int64 { return s.probed.Load() }
