package quant

import (
	"encoding/binary"
	"math"
)

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
	out := make([]byte, len(xs)/Q8_0Block*Q8_0BlockBytes)
	for b := 0; b < len(xs)/Q8_0Block; b++ {
		blk := xs[b*Q8_0Block : (b+1)*Q8_0Block]
		amax := float32(0)
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		o := out[b*Q8_0BlockBytes:]
		binary.LittleEndian.PutUint16(o, F32ToF16(d))
		for j, x := range blk {
			o[2+j] = byte(int8(math.Round(float64(x * id))))
		}
	}
	return out
}

// DequantizeQ8_0 decodes Q8_0 blocks into out (len(out) values).
func DequantizeQ8_0(out []float32, q []byte) {
	for b := 0; b < len(out)/Q8_0Block; b++ {
		blk := q[b*Q8_0BlockBytes:]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < Q8_0Block; j++ {
			out[b*Q8_0Block+j] = d * float32(int8(blk[2+j]))
		}
	}
}
