// Package xerial decodes a Kafka record batch compressed with snappy, raw
// or in the block framing the Java producer writes (xerial), bounded: the
// lengths its blocks claim are checked against a maximum before anything
// is allocated. The consumer's decompressor and the replay of a skipped
// batch both read it.
package xerial

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// xerialPrefix starts a snappy batch in the framing the Java producer
// writes: a 16-byte header, then blocks, each a big-endian length and a
// raw snappy block.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// Decode decodes a raw or xerial-framed snappy batch, checking the
// lengths its blocks claim against max before it allocates.
func Decode(src []byte, max int) ([]byte, error) {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		if n, err := s2.DecodedLen(src); err != nil {
			return nil, err
		} else if n > max {
			return nil, kgo.ErrMaxDecompress
		}
		return s2.Decode(nil, src)
	}
	var blocks [][]byte
	total := 0
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("malformed xerial framing")
		}
		size := int(int32(binary.BigEndian.Uint32(rest)))
		rest = rest[4:]
		if size < 0 || size > len(rest) {
			return nil, errors.New("malformed xerial framing")
		}
		n, err := s2.DecodedLen(rest[:size])
		if err != nil {
			return nil, err
		}
		if total += n; total > max {
			return nil, kgo.ErrMaxDecompress
		}
		blocks, rest = append(blocks, rest[:size]), rest[size:]
	}
	out := make([]byte, 0, total)
	for _, b := range blocks {
		n, _ := s2.DecodedLen(b)
		if _, err := s2.Decode(out[len(out):len(out)+n], b); err != nil {
			return nil, err
		}
		out = out[:len(out)+n]
	}
	return out, nil
}
