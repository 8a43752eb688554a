package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// EncodeF32 returns xs as little-endian F32 tensor data.
func EncodeF32(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// EncodeF16 returns xs as little-endian F16 tensor data (round to nearest
// even, as ggml's FP32→FP16 conversion).
func EncodeF16(xs []float32) []byte {
	out := make([]byte, 2*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(x))
	}
	return out
}

// QuantizeQ8_0 returns xs as Q8_0 tensor data, using ggml's reference
// quantizer (per block of 32: scale d = max|x|/127 stored as F16, q =
// round(x/d)). len(xs) must be a multiple of 32.
func QuantizeQ8_0(xs []float32) ([]byte, error) {
	const qk = 32
	if len(xs)%qk != 0 {
		return nil, fmt.Errorf("gguf: Q8_0 needs a multiple of %d values, got %d", qk, len(xs))
	}
	out := make([]byte, len(xs)/qk*34)
	for b := 0; b < len(xs)/qk; b++ {
		blk := xs[b*qk : (b+1)*qk]
		amax := float32(0)
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		o := out[b*34:]
		binary.LittleEndian.PutUint16(o, F32ToF16(d))
		for j, x := range blk {
			o[2+j] = byte(int8(math.Round(float64(x * id))))
		}
	}
	return out, nil
}

// F32ToF16 converts a float32 to IEEE half-precision bits, rounding to
// nearest even; overflow gives ±Inf and NaN stays NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf/NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 142: // >= 2^16: overflow
		return sign | 0x7c00
	case exp >= 113: // normal half
		h := uint32(exp-112)<<10 | mant>>13
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into exponent, which is correct (up to Inf)
		}
		return sign | uint16(h)
	case exp >= 102: // subnormal half
		m := mant | 0x800000
		shift := uint32(126 - exp)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}

// F16ToF32 converts IEEE half-precision bits to float32.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}
