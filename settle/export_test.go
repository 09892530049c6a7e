package settle

// CopyRowsMin exposes the batch size from which rows are written with COPY
// to TestSmallAndLargeBatchesWriteTheSameRows, which must settle on both
// sides of it.
const CopyRowsMin = copyRowsMin
