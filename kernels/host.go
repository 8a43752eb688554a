package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/sluice-llm/sluice/quant"
)

// Host is a tensor in host memory, the storage of the CPU backends. F32
// tensors keep their values in F; Q8_0 tensors keep their blocks in Q.
type Host struct {
	R, C int
	DT   DType
	F    []float32
	Q    []byte
	// S holds, for Q8_0 tensors made by NewHostWeight, every block's scale
	// decoded to float32 (R rows of C/32), so that kernels need not convert
	// the float16 scales on every use. Nil means: read them from Q.
	S []float32
	// P is an optional copy of an F32 weight re-laid by a backend for its
	// MatMul (the CPU backend's 16-column panels; see kernels/cpu). Nil
	// means: use F.
	P []float32
	// H holds an F16 tensor's elements (a KV cache made by a backend's
	// AllocKV).
	H []uint16
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
// 4-byte aligned is used in place (no copy); otherwise it is decoded.
func NewHostWeight(dt DType, rows, cols int, data []byte) (*Host, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("kernels: bad weight shape %d×%d", rows, cols)
	}
	want := rows * dt.RowBytes(cols)
	switch dt {
	case F32:
		if len(data) != want {
			return nil, fmt.Errorf("kernels: F32 weight %d×%d needs %d bytes, got %d", rows, cols, want, len(data))
		}
		return &Host{R: rows, C: cols, DT: F32, F: BytesToF32(data)}, nil
	case Q8_0:
		if cols%Q8Block != 0 {
			return nil, fmt.Errorf("kernels: Q8_0 weight %d×%d: cols must be a multiple of %d", rows, cols, Q8Block)
		}
		if len(data) != want {
			return nil, fmt.Errorf("kernels: Q8_0 weight %d×%d needs %d bytes, got %d", rows, cols, want, len(data))
		}
		nb := cols / Q8Block
		sc := make([]float32, rows*nb)
		for i := range sc {
			sc[i] = quant.F16ToF32(binary.LittleEndian.Uint16(data[i*Q8BlockBytes:]))
		}
		return &Host{R: rows, C: cols, DT: Q8_0, Q: data, S: sc}, nil
	}
	return nil, fmt.Errorf("kernels: unsupported weight type %v", dt)
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
