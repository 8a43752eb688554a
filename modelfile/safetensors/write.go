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
	return WriteStream(w, tensors, meta, func(i int, w io.Writer) error {
		_, err := w.Write(tensors[i].Data)
		return err
	})
}

// WriteStream is Write for files too large to hold in memory: tensors give
// only names, dtypes and shapes (their Data is ignored), and data(i, w) is
// called once per tensor, in order, to write its bytes to w (in as many
// pieces as it likes; the total must be the tensor's size, or WriteStream
// fails naming the tensor).
func WriteStream(w io.Writer, tensors []Tensor, meta map[string]string, data func(i int, w io.Writer) error) error {
	header := make(map[string]any, len(tensors)+1)
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	sizes := make([]int64, len(tensors))
	var off int64
	for i, t := range tensors {
		n, err := TensorBytes(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		if t.Data != nil && n != int64(len(t.Data)) {
			return fmt.Errorf("safetensors: write tensor %q: %s %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, n, len(t.Data))
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: write tensor %q: name used twice", t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		sizes[i] = n
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: encode header: %w", err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	cw := &countingWriter{w: bufio.NewWriterSize(w, 1<<20)}
	var lenb [8]byte
	binary.LittleEndian.PutUint64(lenb[:], uint64(len(hb)))
	cw.Write(lenb[:])
	cw.Write(hb)
	for i, t := range tensors {
		start := cw.n
		if err := data(i, cw); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		if cw.err != nil {
			break
		}
		if got := cw.n - start; got != sizes[i] {
			return fmt.Errorf("safetensors: write tensor %q: %s %v needs %d bytes, got %d", t.Name, t.DType, t.Shape, sizes[i], got)
		}
	}
	if cw.err != nil {
		return fmt.Errorf("safetensors: write: %w", cw.err)
	}
	if err := cw.w.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// TensorBytes is the data size of a tensor of the given dtype and shape.
func TensorBytes(dtype string, shape []int) (int64, error) {
	n := int64(ElemSize(dtype))
	if n == 0 {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)) {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// countingWriter counts the bytes written and keeps the first error.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
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
