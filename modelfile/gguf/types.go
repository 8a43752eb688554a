package gguf

import "fmt"

// GGMLType is the element type of a tensor (ggml's enum ggml_type).
type GGMLType uint32

// The ggml tensor types. The numbers are ggml's and are stored in files.
const (
	TypeF32  GGMLType = 0
	TypeF16  GGMLType = 1
	TypeQ4_0 GGMLType = 2
	TypeQ4_1 GGMLType = 3
	TypeQ5_0 GGMLType = 6
	TypeQ5_1 GGMLType = 7
	TypeQ8_0 GGMLType = 8
	TypeQ8_1 GGMLType = 9
	TypeQ2_K GGMLType = 10
	TypeQ3_K GGMLType = 11
	TypeQ4_K GGMLType = 12
	TypeQ5_K GGMLType = 13
	TypeQ6_K GGMLType = 14
	TypeQ8_K GGMLType = 15
	TypeI8   GGMLType = 24
	TypeI16  GGMLType = 25
	TypeI32  GGMLType = 26
	TypeI64  GGMLType = 27
	TypeF64  GGMLType = 28
	TypeBF16 GGMLType = 30
	// TypeMXFP4 is OCP microscaling FP4 (32 E2M1 values and one E8M0
	// scale, 17 bytes), gpt-oss's expert weights.
	TypeMXFP4 GGMLType = 39
)

// typeTraits gives, per type, the number of elements in one block and the
// bytes one block takes.
var typeTraits = map[GGMLType]struct {
	name       string
	blockElems uint64
	blockBytes uint64
}{
	TypeF32:   {"F32", 1, 4},
	TypeF16:   {"F16", 1, 2},
	TypeBF16:  {"BF16", 1, 2},
	TypeF64:   {"F64", 1, 8},
	TypeI8:    {"I8", 1, 1},
	TypeI16:   {"I16", 1, 2},
	TypeI32:   {"I32", 1, 4},
	TypeI64:   {"I64", 1, 8},
	TypeQ4_0:  {"Q4_0", 32, 18},
	TypeQ4_1:  {"Q4_1", 32, 20},
	TypeQ5_0:  {"Q5_0", 32, 22},
	TypeQ5_1:  {"Q5_1", 32, 24},
	TypeQ8_0:  {"Q8_0", 32, 34},
	TypeQ8_1:  {"Q8_1", 32, 36},
	TypeQ2_K:  {"Q2_K", 256, 84},
	TypeQ3_K:  {"Q3_K", 256, 110},
	TypeQ4_K:  {"Q4_K", 256, 144},
	TypeQ5_K:  {"Q5_K", 256, 176},
	TypeQ6_K:  {"Q6_K", 256, 210},
	TypeQ8_K:  {"Q8_K", 256, 292},
	TypeMXFP4: {"MXFP4", 32, 17},
}

// String returns ggml's name of the type ("F32", "Q4_K", ...).
func (t GGMLType) String() string {
	if tr, ok := typeTraits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// Known reports whether the reader knows the type's block layout.
func (t GGMLType) Known() bool {
	_, ok := typeTraits[t]
	return ok
}

// BlockSize returns the number of elements in one block of the type (1 for
// plain types, 32 for Q8_0/Q4_0, 256 for the K-quants), or 0 if unknown.
func (t GGMLType) BlockSize() uint64 { return typeTraits[t].blockElems }

// BlockBytes returns the bytes one block of the type takes, or 0 if unknown.
func (t GGMLType) BlockBytes() uint64 { return typeTraits[t].blockBytes }

// RowBytes returns the bytes n elements of the type take. It fails when the
// type is unknown or n is not a whole number of blocks.
func (t GGMLType) RowBytes(n uint64) (uint64, error) {
	tr, ok := typeTraits[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown ggml type %d", uint32(t))
	}
	if n%tr.blockElems != 0 {
		return 0, fmt.Errorf("gguf: %d elements is not a multiple of the %s block size %d", n, tr.name, tr.blockElems)
	}
	blocks := n / tr.blockElems
	if blocks != 0 && blocks*tr.blockBytes/blocks != tr.blockBytes {
		return 0, fmt.Errorf("gguf: %d elements of %s overflow", n, tr.name)
	}
	return blocks * tr.blockBytes, nil
}

// ValueType is the type tag of a metadata value (gguf_type).
type ValueType uint32

// The metadata value types, as stored in files.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String returns the type's name ("uint32", "array", ...).
func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(v))
}

// fixedSize is the encoded size of a scalar value type, 0 for string/array,
// -1 for unknown types.
func (v ValueType) fixedSize() int {
	switch v {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	case ValueString, ValueArray:
		return 0
	}
	return -1
}
