package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Tensor is one tensor for Write.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Write writes tensors (in order) as a safetensors file. The header is
// padded with spaces to a multiple of 8 bytes so that the data section is
// aligned.
func Write(w io.Writer, tensors []Tensor, meta map[string]string) error {
	header := make(map[string]any, len(tensors)+1)
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for _, t := range tensors {
		es := ElemSize(t.DType)
		n := int64(es)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if es == 0 || n != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write tensor %q: %s %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, n, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: encode header: %w", err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenb [8]byte
	binary.LittleEndian.PutUint64(lenb[:], uint64(len(hb)))
	bw.Write(lenb[:])
	bw.Write(hb)
	for _, t := range tensors {
		if _, err := bw.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// F32Bytes encodes xs as little-endian F32 bytes.
func F32Bytes(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// BF16Bytes encodes xs as bfloat16 (round to nearest even).
func BF16Bytes(xs []float32) []byte {
	out := make([]byte, 2*len(xs))
	for i, x := range xs {
		b := math.Float32bits(x)
		b += 0x7fff + (b>>16)&1
		binary.LittleEndian.PutUint16(out[2*i:], uint16(b>>16))
	}
	return out
}
