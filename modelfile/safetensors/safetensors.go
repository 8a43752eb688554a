// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw tensor bytes. Files are memory-mapped
// and tensor data is served from the mapping without a copy.
//
// It is hand-written because there is no usable Go library here:
// github.com/nlpodyssey/safetensors is not reachable through the module
// proxy, and the format is small enough (this file) to own outright.
//
// Parsing is defensive: the header length, every offset and every shape is
// checked against the file size before use, so a truncated or corrupt file
// gives an error naming the file and the tensor, never a panic.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/sluice-llm/sluice/modelfile/mapfile"
)

// maxHeader bounds the JSON header (the reference implementation uses
// 100 MB).
const maxHeader = 100 << 20

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType string // "F32", "F16", "BF16", "I32", ...
	Shape []int
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// NumElements returns the product of Shape.
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// ElemSize returns the byte size of one element of dtype, or 0 if unknown.
func ElemSize(dtype string) int {
	switch dtype {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "F16", "BF16", "I16", "U16":
		return 2
	case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2":
		return 1
	}
	return 0
}

// File is one open safetensors file.
type File struct {
	Path string
	// Meta is the header's __metadata__ map.
	Meta    map[string]string
	tensors map[string]TensorInfo
	data    []byte // data section
	whole   []byte
	mapped  bool
}

// Open memory-maps path and parses its header.
func Open(path string) (*File, error) {
	data, err := mapfile.Map(path, 8)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := parse(path, data)
	if err != nil {
		_ = mapfile.Unmap(data)
		return nil, err
	}
	f.mapped = true
	return f, nil
}

// Parse parses safetensors bytes held in memory (data must outlive the
// File).
func Parse(data []byte) (*File, error) { return parse("<memory>", data) }

func parse(path string, data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("safetensors: %s: %d bytes, too short for a header", path, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors: %s: header length %d exceeds the file (%d bytes) or the %d limit", path, n, len(data), maxHeader)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("safetensors: %s: parse header: %w", path, err)
	}
	f := &File{Path: path, tensors: make(map[string]TensorInfo, len(raw)), data: data[8+n:], whole: data}
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &f.Meta); err != nil {
				return nil, fmt.Errorf("safetensors: %s: __metadata__: %w", path, err)
			}
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int   `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", path, name, err)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > int64(len(f.data)) {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: data_offsets %v outside the data section (%d bytes): truncated or corrupt file", path, name, e.Offsets, len(f.data))
		}
		es := ElemSize(e.DType)
		if es == 0 {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: unknown dtype %q", path, name, e.DType)
		}
		ti := TensorInfo{Name: name, DType: e.DType, Shape: e.Shape, Begin: e.Offsets[0], End: e.Offsets[1]}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && elems > math.MaxInt64/int64(d)/8) {
				return nil, fmt.Errorf("safetensors: %s: tensor %q: bad shape %v", path, name, e.Shape)
			}
			elems *= int64(d)
		}
		if elems*int64(es) != ti.End-ti.Begin {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: shape %v of %s needs %d bytes but data_offsets give %d",
				path, name, e.Shape, e.DType, elems*int64(es), ti.End-ti.Begin)
		}
		f.tensors[name] = ti
	}
	return f, nil
}

// Close unmaps the file.
func (f *File) Close() error {
	if f == nil || f.whole == nil {
		return nil
	}
	var err error
	if f.mapped {
		if err = mapfile.Unmap(f.whole); err != nil {
			err = fmt.Errorf("safetensors: %s: %w", f.Path, err)
		}
	}
	f.whole, f.data = nil, nil
	return err
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// TensorData returns the named tensor's bytes (a read-only view of the
// mapping, valid until Close).
func (f *File) TensorData(name string) ([]byte, TensorInfo, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, t, fmt.Errorf("safetensors: %s: no tensor %q", f.Path, name)
	}
	if f.data == nil {
		return nil, t, fmt.Errorf("safetensors: %s: file is closed", f.Path)
	}
	return f.data[t.Begin:t.End:t.End], t, nil
}

// Model is a model's set of safetensors files: one model.safetensors, or
// the shards listed by model.safetensors.index.json.
type Model struct {
	Dir    string
	files  []*File
	byName map[string]*File
}

// OpenModel opens the safetensors weights of a Hugging Face model
// directory.
func OpenModel(dir string) (*Model, error) {
	m := &Model{Dir: dir, byName: map[string]*File{}}
	idx := filepath.Join(dir, "model.safetensors.index.json")
	var paths []string
	if b, err := os.ReadFile(idx); err == nil {
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &index); err != nil {
			return nil, fmt.Errorf("safetensors: parse %s: %w", idx, err)
		}
		seen := map[string]bool{}
		for _, shard := range index.WeightMap {
			if !seen[shard] {
				seen[shard] = true
				paths = append(paths, filepath.Join(dir, filepath.Clean("/" + shard)[1:]))
			}
		}
		sort.Strings(paths)
	} else if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		paths = []string{filepath.Join(dir, "model.safetensors")}
	} else {
		return nil, fmt.Errorf("safetensors: %s has neither model.safetensors nor model.safetensors.index.json", dir)
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.files = append(m.files, f)
		for n := range f.tensors {
			m.byName[n] = f
		}
	}
	return m, nil
}

// Tensor returns the info of the named tensor in whichever shard holds it.
func (m *Model) Tensor(name string) (TensorInfo, bool) {
	f, ok := m.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensor(name)
}

// Names returns the names of every tensor of every shard, sorted.
func (m *Model) Names() []string {
	names := make([]string, 0, len(m.byName))
	for n := range m.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TensorData returns the named tensor's bytes and the file holding them.
func (m *Model) TensorData(name string) ([]byte, TensorInfo, string, error) {
	f, ok := m.byName[name]
	if !ok {
		return nil, TensorInfo{}, m.Dir, fmt.Errorf("safetensors: %s: no tensor %q in any shard", m.Dir, name)
	}
	b, t, err := f.TensorData(name)
	return b, t, f.Path, err
}

// Close unmaps every shard.
func (m *Model) Close() error {
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files = nil
	return first
}
