package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
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
			sc[i] = F16ToF32(binary.LittleEndian.Uint16(data[i*Q8BlockBytes:]))
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

// F16ToF32 converts IEEE half-precision bits to float32.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BF16ToF32 converts bfloat16 bits to float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 converts a float32 to IEEE half-precision bits, rounding to
// nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++
	}
	return sign | uint16(half)
}

// QuantizeQ8_0 encodes xs (a multiple of 32 values) as Q8_0 blocks with
// ggml's reference rounding.
func QuantizeQ8_0(xs []float32) []byte {
	out := make([]byte, len(xs)/Q8Block*Q8BlockBytes)
	for b := 0; b < len(xs)/Q8Block; b++ {
		blk := xs[b*Q8Block : (b+1)*Q8Block]
		amax := float32(0)
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		o := out[b*Q8BlockBytes:]
		binary.LittleEndian.PutUint16(o, F32ToF16(d))
		for j, x := range blk {
			o[2+j] = byte(int8(math.Round(float64(x * id))))
		}
	}
	return out
}

// DequantizeQ8_0 decodes Q8_0 blocks into out (len(out) values).
func DequantizeQ8_0(out []float32, q []byte) {
	for b := 0; b < len(out)/Q8Block; b++ {
		blk := q[b*Q8BlockBytes:]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < Q8Block; j++ {
			out[b*Q8Block+j] = d * float32(int8(blk[2+j]))
		}
	}
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
