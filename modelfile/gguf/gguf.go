// Package gguf reads and writes GGUF model files (versions 2 and 3): the
// header, the typed metadata key/values, the tensor directory, and the tensor
// bytes, which are served straight from a read-only memory map.
//
// It is hand-written rather than built on github.com/gpustack/gguf-parser-go
// because that module pulls in HTTP/remote-file dependencies the engine does
// not want and parses into copies instead of giving mmapped access to tensor
// data. The format is small: see
// https://github.com/ggml-org/ggml/blob/master/docs/gguf.md.
//
// Parsing never panics on hostile input: every length read from the file is
// checked against the bytes that remain before anything is allocated, so a
// corrupt or truncated file yields an error naming the file and the field.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-llm/sluice/modelfile/mapfile"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data-section alignment when the file does not set
// general.alignment.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// maxNesting bounds nested arrays so hostile input cannot recurse deeply.
const maxNesting = 8

// ErrNotGGUF is returned when the data does not start with the GGUF magic.
var ErrNotGGUF = errors.New("gguf: not a GGUF file (bad magic)")

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	// Name is the tensor's name, e.g. "blk.0.attn_q.weight".
	Name string
	// Dims are the tensor's extents in ggml order: Dims[0] is the
	// fastest-varying (row length).
	Dims []uint64
	// Type is the element type.
	Type GGMLType
	// Offset is the byte offset of the tensor's data from the start of the
	// data section.
	Offset uint64
	// Size is the byte size of the tensor's data, derived from Dims and Type.
	Size uint64
}

// NumElements returns the product of Dims.
func (t TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is an open GGUF file. Its tensor data is memory-mapped; slices
// returned by TensorData are valid until Close.
type File struct {
	// Path is the file's path ("" for data parsed from memory).
	Path string
	// Version is the GGUF version (2 or 3).
	Version uint32
	// Meta holds the metadata key/values.
	Meta Metadata
	// Alignment is the data-section alignment in bytes.
	Alignment uint64
	// DataOffset is the file offset where the data section starts.
	DataOffset uint64

	tensors []TensorInfo
	byName  map[string]int
	data    []byte // whole file
	mapped  bool
}

// Open memory-maps path and parses its header, metadata and tensor
// directory. Close releases the mapping.
func Open(path string) (*File, error) {
	data, err := mapfile.Map(path, 24)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(path, data)
	if err != nil {
		_ = mapfile.Unmap(data)
		return nil, err
	}
	f.mapped = true
	return f, nil
}

// Parse parses GGUF data held in memory. The File refers to data, which must
// stay unchanged while the File is used. Close is a no-op for such a File.
func Parse(data []byte) (*File, error) {
	return parse("", data)
}

// Close unmaps the file. Slices from TensorData must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.data == nil {
		return nil
	}
	var err error
	if f.mapped {
		if err = mapfile.Unmap(f.data); err != nil {
			err = fmt.Errorf("gguf: %s: %w", f.Path, err)
		}
	}
	f.data = nil
	return err
}

// Arch returns general.architecture ("llama", "qwen2", ...), or "".
func (f *File) Arch() string {
	s, _ := f.Meta.String("general.architecture")
	return s
}

// Tensors returns the tensor directory in file order. The caller must not
// modify it.
func (f *File) Tensors() []TensorInfo { return f.tensors }

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// TensorData returns the bytes of the named tensor straight from the memory
// map (read-only; writing to them faults). It fails when the tensor is
// missing or when the file is too short to hold it.
func (f *File) TensorData(name string) ([]byte, TensorInfo, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("gguf: %s: no tensor %q", f.name(), name)
	}
	if f.data == nil {
		return nil, TensorInfo{}, fmt.Errorf("gguf: %s: file is closed", f.name())
	}
	ti := f.tensors[i]
	start := f.DataOffset + ti.Offset
	end := start + ti.Size
	if start < f.DataOffset || end < start || end > uint64(len(f.data)) {
		return nil, ti, fmt.Errorf("gguf: %s: tensor %q (%s %v) needs bytes [%d, %d) but the file has %d: truncated or inconsistent file",
			f.name(), name, ti.Type, ti.Dims, start, end, len(f.data))
	}
	return f.data[start:end:end], ti, nil
}

func (f *File) name() string {
	if f.Path == "" {
		return "<memory>"
	}
	return f.Path
}

// reader is a bounds-checked cursor over the file bytes.
type reader struct {
	b    []byte
	off  uint64
	path string
}

func (r *reader) fail(field string, format string, args ...any) error {
	name := r.path
	if name == "" {
		name = "<memory>"
	}
	return fmt.Errorf("gguf: %s: %s at offset %d: %s", name, field, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) remaining() uint64 { return uint64(len(r.b)) - r.off }

func (r *reader) take(n uint64, field string) ([]byte, error) {
	if n > r.remaining() {
		return nil, r.fail(field, "need %d bytes, %d remain (truncated file)", n, r.remaining())
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

func (r *reader) u32(field string) (uint32, error) {
	s, err := r.take(4, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (r *reader) u64(field string) (uint64, error) {
	s, err := r.take(8, field)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

func (r *reader) str(field string) (string, error) {
	n, err := r.u64(field + " length")
	if err != nil {
		return "", err
	}
	s, err := r.take(n, field)
	if err != nil {
		return "", err
	}
	return string(s), nil
}

func parse(path string, data []byte) (*File, error) {
	r := &reader{b: data, path: path}
	magic, err := r.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("%w: %s starts with %q", ErrNotGGUF, r.path, magic)
	}
	f := &File{Path: path, data: data}
	if f.Version, err = r.u32("version"); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, r.fail("version", "unsupported GGUF version %d (want 2 or 3)", f.Version)
	}
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Each KV takes at least 8+4+1 bytes, each tensor info at least 8+4+4+8.
	if nKV > r.remaining()/13 {
		return nil, r.fail("metadata count", "%d key/values cannot fit in %d bytes", nKV, r.remaining())
	}
	f.Meta = Metadata{values: make(map[string]Value, nKV)}
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str(fmt.Sprintf("metadata[%d] key", i))
		if err != nil {
			return nil, err
		}
		vt, err := r.u32("metadata " + key + " type")
		if err != nil {
			return nil, err
		}
		v, err := r.value(ValueType(vt), key, 0)
		if err != nil {
			return nil, err
		}
		if _, dup := f.Meta.values[key]; dup {
			return nil, r.fail("metadata "+key, "duplicate key")
		}
		f.Meta.keys = append(f.Meta.keys, key)
		f.Meta.values[key] = v
	}
	f.Alignment = DefaultAlignment
	if v, ok := f.Meta.values["general.alignment"]; ok {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return nil, r.fail("general.alignment", "must be a power of two, got %v", v.Any())
		}
		f.Alignment = a
	}
	if nTensors > r.remaining()/24 {
		return nil, r.fail("tensor count", "%d tensor infos cannot fit in %d bytes", nTensors, r.remaining())
	}
	f.tensors = make([]TensorInfo, 0, nTensors)
	f.byName = make(map[string]int, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		ti, err := r.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.byName[ti.Name]; dup {
			return nil, r.fail("tensor "+ti.Name, "duplicate tensor name")
		}
		f.byName[ti.Name] = len(f.tensors)
		f.tensors = append(f.tensors, ti)
	}
	f.DataOffset = alignUp(r.off, f.Alignment)
	if f.DataOffset > uint64(len(data)) && nTensors > 0 {
		return nil, r.fail("data section", "starts at %d beyond end of file (%d bytes)", f.DataOffset, len(data))
	}
	return f, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func (r *reader) tensorInfo(i uint64, align uint64) (TensorInfo, error) {
	var ti TensorInfo
	var err error
	if ti.Name, err = r.str(fmt.Sprintf("tensor[%d] name", i)); err != nil {
		return ti, err
	}
	field := "tensor " + ti.Name
	nd, err := r.u32(field + " n_dims")
	if err != nil {
		return ti, err
	}
	if nd > maxDims {
		return ti, r.fail(field, "%d dimensions (max %d)", nd, maxDims)
	}
	ti.Dims = make([]uint64, nd)
	n := uint64(1)
	for d := range ti.Dims {
		if ti.Dims[d], err = r.u64(field + " dims"); err != nil {
			return ti, err
		}
		if ti.Dims[d] != 0 && n > math.MaxInt64/ti.Dims[d] {
			return ti, r.fail(field, "dims %v overflow", ti.Dims)
		}
		n *= ti.Dims[d]
	}
	t, err := r.u32(field + " type")
	if err != nil {
		return ti, err
	}
	ti.Type = GGMLType(t)
	if ti.Offset, err = r.u64(field + " offset"); err != nil {
		return ti, err
	}
	if ti.Offset%align != 0 {
		return ti, r.fail(field, "offset %d not aligned to %d", ti.Offset, align)
	}
	if nd > 0 && ti.Dims[0]%max(ti.Type.BlockSize(), 1) != 0 {
		return ti, r.fail(field, "row length %d not a multiple of the %s block size %d", ti.Dims[0], ti.Type, ti.Type.BlockSize())
	}
	if ti.Size, err = ti.Type.RowBytes(n); err != nil {
		return ti, r.fail(field, "%v", err)
	}
	return ti, nil
}

func (r *reader) value(vt ValueType, key string, depth int) (Value, error) {
	field := "metadata " + key
	switch vt {
	case ValueString:
		s, err := r.str(field)
		return Value{Type: vt, v: s}, err
	case ValueArray:
		if depth >= maxNesting {
			return Value{}, r.fail(field, "arrays nested deeper than %d", maxNesting)
		}
		et, err := r.u32(field + " array type")
		if err != nil {
			return Value{}, err
		}
		n, err := r.u64(field + " array length")
		if err != nil {
			return Value{}, err
		}
		return r.array(ValueType(et), n, key, depth)
	}
	sz := vt.fixedSize()
	if sz <= 0 {
		return Value{}, r.fail(field, "unknown value type %d", uint32(vt))
	}
	b, err := r.take(uint64(sz), field)
	if err != nil {
		return Value{}, err
	}
	return Value{Type: vt, v: scalar(vt, b)}, nil
}

func scalar(vt ValueType, b []byte) any {
	switch vt {
	case ValueUint8:
		return b[0]
	case ValueInt8:
		return int8(b[0])
	case ValueBool:
		return b[0] != 0
	case ValueUint16:
		return binary.LittleEndian.Uint16(b)
	case ValueInt16:
		return int16(binary.LittleEndian.Uint16(b))
	case ValueUint32:
		return binary.LittleEndian.Uint32(b)
	case ValueInt32:
		return int32(binary.LittleEndian.Uint32(b))
	case ValueFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case ValueUint64:
		return binary.LittleEndian.Uint64(b)
	case ValueInt64:
		return int64(binary.LittleEndian.Uint64(b))
	case ValueFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return nil
}

func (r *reader) array(et ValueType, n uint64, key string, depth int) (Value, error) {
	field := "metadata " + key
	v := Value{Type: ValueArray, Elem: et}
	minSize := uint64(et.fixedSize())
	switch et {
	case ValueString:
		minSize = 8
	case ValueArray:
		minSize = 12
	}
	if et.fixedSize() < 0 {
		return v, r.fail(field, "unknown array element type %d", uint32(et))
	}
	if n > r.remaining()/minSize {
		return v, r.fail(field, "array of %d %s cannot fit in %d bytes", n, et, r.remaining())
	}
	switch et {
	case ValueString:
		out := make([]string, n)
		for i := range out {
			s, err := r.str(field)
			if err != nil {
				return v, err
			}
			out[i] = s
		}
		v.v = out
	case ValueArray:
		out := make([]Value, n)
		for i := range out {
			e, err := r.value(ValueArray, key, depth+1)
			if err != nil {
				return v, err
			}
			out[i] = e
		}
		v.v = out
	default:
		b, _ := r.take(n*minSize, field) // length checked above
		v.v = scalarSlice(et, b, int(n))
	}
	return v, nil
}

func scalarSlice(et ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case ValueUint8:
		return append([]uint8(nil), b...)
	case ValueInt8:
		return decodeEach(b, n, 1, func(p []byte) int8 { return int8(p[0]) })
	case ValueBool:
		return decodeEach(b, n, 1, func(p []byte) bool { return p[0] != 0 })
	case ValueUint16:
		return decodeEach(b, n, 2, le.Uint16)
	case ValueInt16:
		return decodeEach(b, n, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case ValueUint32:
		return decodeEach(b, n, 4, le.Uint32)
	case ValueInt32:
		return decodeEach(b, n, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case ValueFloat32:
		return decodeEach(b, n, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case ValueUint64:
		return decodeEach(b, n, 8, le.Uint64)
	case ValueInt64:
		return decodeEach(b, n, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	case ValueFloat64:
		return decodeEach(b, n, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
	return nil
}

// decodeEach decodes n little-endian values of size bytes each from b.
func decodeEach[T any](b []byte, n, size int, dec func([]byte) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = dec(b[size*i:])
	}
	return out
}

// Check verifies that every tensor's data lies inside the file, returning
// the first violation as an error naming the file, the tensor and the bytes
// it needs.
func (f *File) Check() error {
	for _, t := range f.tensors {
		if _, _, err := f.TensorData(t.Name); err != nil {
			return err
		}
	}
	return nil
}
