package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/sluice-llm/sluice/quant"
)

// Host is a tensor in host memory, the storage of the CPU backends. F32
// tensors keep their values in F; weights of every other type keep their
// encoded bytes, exactly as stored in the model file, in Q.
type Host struct {
	R, C int
	DT   DType
	F    []float32
	Q    []byte
	// S optionally holds a Q8_0 tensor's block scales decoded to float32 (R
	// rows of C/32). NewHostWeight leaves it nil (no second copy of any
	// weight): kernels read the float16 scales from Q.
	S []float32
	// P is an optional copy of an F32 weight re-laid by a backend for its
	// MatMul (the CPU backend's 16-column panels; see kernels/cpu). Nil
	// means: use F.
	P []float32
	// H holds an F16 tensor's elements (a KV cache made by a backend's
	// AllocKV).
	H []uint16
	// Repacked says Q holds a Q4_K weight's blocks in the CPU backend's
	// batch-1 layout (quant.RepackQ4K: the same bytes reordered within each
	// block), not the file's; set by that backend's PrepareMatMul, which
	// alone multiplies with it. RowF32 still decodes it.
	Repacked bool
	// Copied says Q is a copy a backend made of the bytes it was given (the
	// same layout, in memory the backend owns: the CPU backend's huge-page
	// arena), so that the loader may release the file's pages; set by
	// that backend's PrepareMatMul.
	Copied bool
}

// Rows returns the number of rows.
func (h *Host) Rows() int { return h.R }

// Cols returns the number of columns.
func (h *Host) Cols() int { return h.C }

// DType returns the element encoding.
func (h *Host) DType() DType { return h.DT }

// Row returns row i of an F32 tensor.
func (h *Host) Row(i int) []float32 { return h.F[i*h.C : (i+1)*h.C] }

// NewHostWeight makes a Host tensor from encoded bytes. F32 data that is
// 4-byte aligned is used in place (no copy); otherwise it is decoded. Every
// other type (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4) keeps data as given
// in Q: it is never copied or written (it may be a read-only memory map).
func NewHostWeight(dt DType, rows, cols int, data []byte) (*Host, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("kernels: bad weight shape %d×%d", rows, cols)
	}
	if blk := dt.BlockValues(); cols%blk != 0 {
		return nil, fmt.Errorf("kernels: %v weight %d×%d: cols must be a multiple of %d", dt, rows, cols, blk)
	}
	want := rows * dt.RowBytes(cols)
	if len(data) != want {
		return nil, fmt.Errorf("kernels: %v weight %d×%d needs %d bytes, got %d", dt, rows, cols, want, len(data))
	}
	switch dt {
	case F32:
		return &Host{R: rows, C: cols, DT: F32, F: BytesToF32(data)}, nil
	case Q8_0, F16, BF16, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4:
		return &Host{R: rows, C: cols, DT: dt, Q: data}, nil
	}
	return nil, fmt.Errorf("kernels: unsupported weight type %v", dt)
}

// BlockValues is the number of values in one block of the encoding (1 for
// the float types): a row's length must be a multiple of it.
func (d DType) BlockValues() int {
	switch d {
	case Q8_0, Q4_0, MXFP4:
		return Q8Block
	case Q4_K, Q5_K, Q6_K:
		return quant.QKBlock
	}
	return 1
}

// DequantizeRow decodes one encoded row (dt.RowBytes(len(out)) bytes of
// src) into out with the reference decoders of package quant. F32 rows are
// read as little-endian floats.
func DequantizeRow(dt DType, out []float32, src []byte) {
	switch dt {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		quant.DequantizeF16(out, src)
	case BF16:
		quant.DequantizeBF16(out, src)
	case Q8_0:
		quant.DequantizeQ8_0(out, src)
	case Q4_0:
		quant.DequantizeQ4_0(out, src)
	case Q4_K:
		quant.DequantizeQ4K(out, src)
	case Q5_K:
		quant.DequantizeQ5K(out, src)
	case Q6_K:
		quant.DequantizeQ6K(out, src)
	case MXFP4:
		quant.DequantizeMXFP4(out, src)
	default:
		panic(fmt.Sprintf("kernels: DequantizeRow: unsupported type %v", dt))
	}
}

// RowF32 decodes row i of a weight of any type into out (C floats).
func (h *Host) RowF32(out []float32, i int) {
	if h.DT == F32 {
		copy(out, h.F[i*h.C:(i+1)*h.C])
		return
	}
	rb := h.DT.RowBytes(h.C)
	if h.Repacked {
		var blk [quant.Q4KBlockBytes]byte
		for o := 0; o < rb; o += len(blk) {
			quant.UnrepackQ4K(blk[:], h.Q[i*rb+o:i*rb+o+len(blk)])
			v := o / len(blk) * quant.QKBlock
			quant.DequantizeQ4K(out[v:v+quant.QKBlock], blk[:])
		}
		return
	}
	DequantizeRow(h.DT, out[:h.C], h.Q[i*rb:(i+1)*rb])
}

// BytesToF32 views little-endian float32 bytes as []float32 without copying
// when the data is 4-byte aligned (the host is little endian), and decodes a
// copy otherwise.
func BytesToF32(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// RoPETableGGML builds the RoPE table as ggml computes it for unscaled
// RoPE, so that rotated queries and keys equal llama.cpp's bit for bit:
// the angle of pair j at position p is the float32 product chain
// p·s·s·…·s (j factors) with s = float32(base^(−2/headDim)), and its
// cosine and sine are rounded to float32 (as cosf/sinf of that angle).
// Row layout as RoPETable.
func RoPETableGGML(maxPos, headDim int, base float64) []float32 {
	half := headDim / 2
	s := float32(math.Pow(float64(float32(base)), float64(float32(-2)/float32(headDim))))
	t := make([]float32, maxPos*2*half)
	for p := 0; p < maxPos; p++ {
		row := t[p*2*half:]
		theta := float32(p)
		for j := 0; j < half; j++ {
			row[j] = float32(math.Cos(float64(theta)))
			row[half+j] = float32(math.Sin(float64(theta)))
			theta *= s
		}
	}
	return t
}

// RoPETable builds the cos/sin table of RoPE for positions [0, maxPos):
// row p holds cos(p·f_j) for j < len(invFreq), then sin(p·f_j). The angles
// are computed in float64.
func RoPETable(maxPos int, invFreq []float64) []float32 {
	half := len(invFreq)
	t := make([]float32, maxPos*2*half)
	for p := 0; p < maxPos; p++ {
		row := t[p*2*half:]
		for j, f := range invFreq {
			s, c := math.Sincos(float64(p) * f)
			row[j] = float32(c)
			row[half+j] = float32(s)
		}
	}
	return t
}
