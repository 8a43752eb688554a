package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// KV is one metadata entry for Write. Value may be any of uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, a slice of one of those, int or []int (written as int32), or a
// Value read from another file.
type KV struct {
	// Key is the metadata key, e.g. "llama.block_count".
	Key string
	// Value is the value; its Go type selects the GGUF type.
	Value any
}

// Tensor is one tensor for Write. Data must hold exactly the bytes Dims and
// Type call for (see GGMLType.RowBytes).
type Tensor struct {
	// Name is the tensor's name.
	Name string
	// Dims are the extents in ggml order (Dims[0] is the row length).
	Dims []uint64
	// Type is the element type.
	Type GGMLType
	// Data is the encoded tensor data.
	Data []byte
}

// Write writes a GGUF v3 file with the given metadata (in order) and
// tensors. The data alignment is meta's general.alignment when present,
// else DefaultAlignment.
func Write(w io.Writer, meta []KV, tensors []Tensor) error {
	for _, t := range tensors {
		if err := checkTensor(t.Name, t.Dims, t.Type, uint64(len(t.Data))); err != nil {
			return err
		}
	}
	return WriteStream(w, meta, tensors, func(i int, w io.Writer) error {
		_, err := w.Write(tensors[i].Data)
		return err
	})
}

// WriteStream is Write for files too large to hold in memory: tensors give
// only names, dims and types (their Data is ignored), and data(i, w) is
// called once per tensor, in order, to write its encoded bytes to w (in as
// many pieces as it likes; the total must be the tensor's size).
func WriteStream(w io.Writer, meta []KV, tensors []Tensor, data func(i int, w io.Writer) error) error {
	align := uint64(DefaultAlignment)
	for _, kv := range meta {
		if kv.Key == "general.alignment" {
			a, ok := asValue(kv.Value)
			if !ok {
				return fmt.Errorf("gguf write: general.alignment: unsupported type %T", kv.Value)
			}
			u, ok := a.Uint()
			if !ok || u == 0 || u&(u-1) != 0 {
				return fmt.Errorf("gguf write: general.alignment must be a power of two, got %v", kv.Value)
			}
			align = u
		}
	}
	bw := &countingWriter{w: bufio.NewWriterSize(w, 1<<20)}
	bw.bytes([]byte(Magic))
	bw.u32(3)
	bw.u64(uint64(len(tensors)))
	bw.u64(uint64(len(meta)))
	for _, kv := range meta {
		v, ok := asValue(kv.Value)
		if !ok {
			return fmt.Errorf("gguf write: metadata %s: unsupported type %T", kv.Key, kv.Value)
		}
		bw.str(kv.Key)
		bw.u32(uint32(v.Type))
		if err := bw.value(v); err != nil {
			return fmt.Errorf("gguf write: metadata %s: %w", kv.Key, err)
		}
	}
	offset := uint64(0)
	sizes := make([]uint64, len(tensors))
	for i, t := range tensors {
		size, err := tensorSize(t.Name, t.Dims, t.Type)
		if err != nil {
			return err
		}
		sizes[i] = size
		bw.str(t.Name)
		bw.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			bw.u64(d)
		}
		bw.u32(uint32(t.Type))
		bw.u64(offset)
		offset = alignUp(offset+size, align)
	}
	bw.pad(align)
	for i, t := range tensors {
		start := bw.n
		if err := data(i, bw); err != nil {
			return fmt.Errorf("gguf write: tensor %s: %w", t.Name, err)
		}
		if bw.err == nil && bw.n-start != sizes[i] {
			return fmt.Errorf("gguf write: tensor %s: %s %v needs %d bytes, got %d", t.Name, t.Type, t.Dims, sizes[i], bw.n-start)
		}
		bw.pad(align)
		if bw.err != nil {
			break
		}
	}
	if bw.err != nil {
		return fmt.Errorf("gguf write: %w", bw.err)
	}
	if err := bw.w.(*bufio.Writer).Flush(); err != nil {
		return fmt.Errorf("gguf write: %w", err)
	}
	return nil
}

// tensorSize is the byte size of a tensor of the given dims and type.
func tensorSize(name string, dims []uint64, typ GGMLType) (uint64, error) {
	if len(dims) == 0 || len(dims) > maxDims {
		return 0, fmt.Errorf("gguf write: tensor %s: %d dims (want 1..%d)", name, len(dims), maxDims)
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	size, err := typ.RowBytes(n)
	if err != nil {
		return 0, fmt.Errorf("gguf write: tensor %s: %w", name, err)
	}
	return size, nil
}

// checkTensor checks that have bytes hold a tensor of dims and typ.
func checkTensor(name string, dims []uint64, typ GGMLType, have uint64) error {
	size, err := tensorSize(name, dims, typ)
	if err != nil {
		return err
	}
	if size != have {
		return fmt.Errorf("gguf write: tensor %s: %s %v needs %d bytes, got %d", name, typ, dims, size, have)
	}
	return nil
}

type countingWriter struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

// Write implements io.Writer for WriteStream's data callbacks.
func (c *countingWriter) Write(b []byte) (int, error) {
	c.bytes(b)
	if c.err != nil {
		return 0, c.err
	}
	return len(b), nil
}

func (c *countingWriter) bytes(b []byte) {
	if c.err != nil {
		return
	}
	_, c.err = c.w.Write(b)
	c.n += uint64(len(b))
}

func (c *countingWriter) u32(x uint32) {
	binary.LittleEndian.PutUint32(c.buf[:4], x)
	c.bytes(c.buf[:4])
}

func (c *countingWriter) u64(x uint64) {
	binary.LittleEndian.PutUint64(c.buf[:8], x)
	c.bytes(c.buf[:8])
}

func (c *countingWriter) str(s string) {
	c.u64(uint64(len(s)))
	c.bytes([]byte(s))
}

func (c *countingWriter) pad(align uint64) {
	var zero [64]byte
	for n := alignUp(c.n, align) - c.n; n > 0; {
		k := min(n, uint64(len(zero)))
		c.bytes(zero[:k])
		n -= k
	}
}

func (c *countingWriter) value(v Value) error {
	switch x := v.v.(type) {
	case uint8:
		c.bytes([]byte{x})
	case int8:
		c.bytes([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		c.bytes([]byte{b})
	case uint16:
		binary.LittleEndian.PutUint16(c.buf[:2], x)
		c.bytes(c.buf[:2])
	case int16:
		binary.LittleEndian.PutUint16(c.buf[:2], uint16(x))
		c.bytes(c.buf[:2])
	case uint32:
		c.u32(x)
	case int32:
		c.u32(uint32(x))
	case float32:
		c.u32(math.Float32bits(x))
	case uint64:
		c.u64(x)
	case int64:
		c.u64(uint64(x))
	case float64:
		c.u64(math.Float64bits(x))
	case string:
		c.str(x)
	default:
		return c.array(v)
	}
	return nil
}

func (c *countingWriter) array(v Value) error {
	c.u32(uint32(v.Elem))
	switch xs := v.v.(type) {
	case []Value:
		c.u64(uint64(len(xs)))
		for _, e := range xs {
			if e.Type != ValueArray {
				return fmt.Errorf("nested array element of type %s", e.Type)
			}
			if err := c.value(e); err != nil {
				return err
			}
		}
		return nil
	case []string:
		return writeSlice(c, xs, func(s string) { c.str(s) })
	case []uint8:
		return writeSlice(c, xs, func(x uint8) { c.bytes([]byte{x}) })
	case []int8:
		return writeSlice(c, xs, func(x int8) { c.bytes([]byte{byte(x)}) })
	case []bool:
		return writeSlice(c, xs, func(x bool) { c.value(Value{v: x}) })
	case []uint16:
		return writeSlice(c, xs, func(x uint16) { c.value(Value{v: x}) })
	case []int16:
		return writeSlice(c, xs, func(x int16) { c.value(Value{v: x}) })
	case []uint32:
		return writeSlice(c, xs, c.u32)
	case []int32:
		return writeSlice(c, xs, func(x int32) { c.u32(uint32(x)) })
	case []float32:
		return writeSlice(c, xs, func(x float32) { c.u32(math.Float32bits(x)) })
	case []uint64:
		return writeSlice(c, xs, c.u64)
	case []int64:
		return writeSlice(c, xs, func(x int64) { c.u64(uint64(x)) })
	case []float64:
		return writeSlice(c, xs, func(x float64) { c.u64(math.Float64bits(x)) })
	}
	return fmt.Errorf("unsupported value %T", v.v)
}

func writeSlice[T any](c *countingWriter, xs []T, put func(T)) error {
	c.u64(uint64(len(xs)))
	for _, x := range xs {
		put(x)
	}
	return nil
}

// asValue converts a Go value to a Value, reporting whether its type is
// supported.
func asValue(x any) (Value, bool) {
	switch v := x.(type) {
	case Value:
		return v, v.v != nil
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return Value{Type: ValueInt32, v: int32(v)}, true
		}
		return Value{Type: ValueInt64, v: int64(v)}, true
	case []int:
		out := make([]int32, len(v))
		for i, e := range v {
			if e < math.MinInt32 || e > math.MaxInt32 {
				return Value{}, false
			}
			out[i] = int32(e)
		}
		return Value{Type: ValueArray, Elem: ValueInt32, v: out}, true
	case uint8:
		return Value{Type: ValueUint8, v: v}, true
	case int8:
		return Value{Type: ValueInt8, v: v}, true
	case uint16:
		return Value{Type: ValueUint16, v: v}, true
	case int16:
		return Value{Type: ValueInt16, v: v}, true
	case uint32:
		return Value{Type: ValueUint32, v: v}, true
	case int32:
		return Value{Type: ValueInt32, v: v}, true
	case float32:
		return Value{Type: ValueFloat32, v: v}, true
	case bool:
		return Value{Type: ValueBool, v: v}, true
	case string:
		return Value{Type: ValueString, v: v}, true
	case uint64:
		return Value{Type: ValueUint64, v: v}, true
	case int64:
		return Value{Type: ValueInt64, v: v}, true
	case float64:
		return Value{Type: ValueFloat64, v: v}, true
	case []uint8:
		return Value{Type: ValueArray, Elem: ValueUint8, v: v}, true
	case []int8:
		return Value{Type: ValueArray, Elem: ValueInt8, v: v}, true
	case []uint16:
		return Value{Type: ValueArray, Elem: ValueUint16, v: v}, true
	case []int16:
		return Value{Type: ValueArray, Elem: ValueInt16, v: v}, true
	case []uint32:
		return Value{Type: ValueArray, Elem: ValueUint32, v: v}, true
	case []int32:
		return Value{Type: ValueArray, Elem: ValueInt32, v: v}, true
	case []float32:
		return Value{Type: ValueArray, Elem: ValueFloat32, v: v}, true
	case []bool:
		return Value{Type: ValueArray, Elem: ValueBool, v: v}, true
	case []string:
		return Value{Type: ValueArray, Elem: ValueString, v: v}, true
	case []uint64:
		return Value{Type: ValueArray, Elem: ValueUint64, v: v}, true
	case []int64:
		return Value{Type: ValueArray, Elem: ValueInt64, v: v}, true
	case []float64:
		return Value{Type: ValueArray, Elem: ValueFloat64, v: v}, true
	}
	return Value{}, false
}
