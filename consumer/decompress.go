package consumer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/xerial"
)

// boundedDecompressor decompresses fetched batches up to max bytes each,
// like the client's own decompressor, with one difference: a zstd frame
// whose window is larger than max is refused as too large (kgo's
// ErrMaxDecompress, so the client reports ErrDecompressTooLarge with the
// batch's offsets and settle skips it), where the client's own reports a
// plain "window size exceeded" that names no offset and stops the
// partition for good. A frame that declares its size (the zstd encoder's
// one-shot mode) has a window as large as its content: every such batch
// past the cap, not only a crafted one, takes that path.
type boundedDecompressor struct {
	max  int
	gzip sync.Pool // *gzip.Reader
	lz4  sync.Pool // *lz4.Reader
	zstd sync.Pool // *zstdDecoder
}

type zstdDecoder struct{ *zstd.Decoder }

func newBoundedDecompressor(max int) *boundedDecompressor {
	d := &boundedDecompressor{max: max}
	d.lz4.New = func() any { return lz4.NewReader(nil) }
	d.zstd.New = func() any {
		dec, _ := zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(max)), zstd.WithDecoderMaxWindow(uint64(max)))
		z := &zstdDecoder{dec}
		runtime.SetFinalizer(z, func(z *zstdDecoder) { z.Close() })
		return z
	}
	return d
}

// Decompress implements kgo.Decompressor.
func (d *boundedDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	switch codec {
	case kgo.CodecNone:
		return src, nil
	case kgo.CodecGzip:
		r, _ := d.gzip.Get().(*gzip.Reader)
		var err error
		if r == nil {
			r, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = r.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return nil, err
		}
		defer d.gzip.Put(r)
		return readBounded(r, d.max)
	case kgo.CodecLz4:
		r, _ := d.lz4.Get().(*lz4.Reader)
		defer d.lz4.Put(r)
		r.Reset(bytes.NewReader(src))
		return readBounded(r, d.max)
	case kgo.CodecSnappy:
		return xerial.Decode(src, d.max)
	case kgo.CodecZstd:
		z, _ := d.zstd.Get().(*zstdDecoder)
		defer d.zstd.Put(z)
		out, err := z.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, fmt.Errorf("%w: %w", kgo.ErrMaxDecompress, err)
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// buffers are the buffers gzip and lz4 batches are read into: one grows
// once to the size of the batches it reads, and each batch is copied out
// of it at its exact size (as the client's own decompressor does).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBounded reads r to its end, refusing more than max bytes.
func readBounded(r io.Reader, max int) ([]byte, error) {
	out, _ := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(out)
	out.Reset()
	n, err := out.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(max) {
		return nil, kgo.ErrMaxDecompress
	}
	return bytes.Clone(out.Bytes()), nil
}
