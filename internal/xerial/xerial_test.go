package xerial

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// frame writes blocks in the Java producer's framing: the 8-byte magic,
// version and compatible version, then each block's length and bytes.
func frame(blocks ...[]byte) []byte {
	out := append(bytes.Clone(xerialPrefix), 0, 0, 0, 1, 0, 0, 0, 1)
	for _, b := range blocks {
		enc := s2.EncodeSnappy(nil, b)
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
	}
	return out
}

// TestDecode: raw and framed batches decode to their bytes; a batch whose
// blocks claim more than the bound is refused before it is decoded, and a
// frame whose lengths run past its end is malformed.
func TestDecode(t *testing.T) {
	a, b := bytes.Repeat([]byte("usage "), 1000), bytes.Repeat([]byte("grant "), 500)
	whole := append(bytes.Clone(a), b...)
	for name, src := range map[string][]byte{"raw": s2.EncodeSnappy(nil, whole), "xerial": frame(a, b)} {
		got, err := Decode(src, len(whole))
		if err != nil || !bytes.Equal(got, whole) {
			t.Errorf("%s: %d bytes, %v; want the %d bytes", name, len(got), err, len(whole))
		}
		if _, err := Decode(src, len(whole)-1); !errors.Is(err, kgo.ErrMaxDecompress) {
			t.Errorf("%s one byte over the bound: %v, want ErrMaxDecompress", name, err)
		}
	}
	cut := frame(a, b)
	if _, err := Decode(cut[:len(cut)-3], len(whole)); err == nil {
		t.Error("a frame cut short decoded")
	}
}
