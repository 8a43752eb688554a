package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// MXFP4 (OCP Microscaling Formats v1.0, "MXFP4"): blocks of 32 FP4 E2M1
// elements sharing one E8M0 scale. An element is sign, 2 exponent bits
// (bias 1) and 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}. The scale is a
// bare biased exponent: 2^(e-127), with 0xFF meaning NaN. A value is
// element × scale; every such product is exact in float32.
//
// Two layouts are in use:
//
//   - ggml's block_mxfp4 (GGUF tensor type 39), 17 bytes: the scale byte,
//     then 16 bytes whose low nibbles are elements 0..15 and high nibbles
//     elements 16..31 (as Q4_0 orders them);
//   - gpt-oss's safetensors, two tensors per weight: "*_blocks" (uint8,
//     [..., blocks, 16]) whose byte j holds element 2j in its low nibble and
//     element 2j+1 in its high nibble, and "*_scales" (uint8, [..., blocks]).
const (
	MXFP4Block      = 32 // elements per block
	MXFP4BlockBytes = 17 // ggml layout: 1 scale byte + 16 bytes of nibbles
	// GGMLTypeMXFP4 is ggml's tensor type id of MXFP4 in GGUF files.
	GGMLTypeMXFP4 = 39
)

// fp4Values are the E2M1 code points 0..15.
var fp4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// FP4ToF32 decodes one FP4 E2M1 code (its low 4 bits).
func FP4ToF32(code uint8) float32 { return fp4Values[code&0xF] }

// E8M0ToF32 decodes an E8M0 scale: 2^(e-127), NaN for 0xFF. (ggml decodes
// 0xFF as 2^128 instead; the OCP specification reserves it for NaN.)
func E8M0ToF32(e uint8) float32 {
	switch {
	case e == 0xFF:
		return float32(math.NaN())
	case e == 0:
		return math.Float32frombits(0x00400000) // 2^-127, subnormal
	}
	return math.Float32frombits(uint32(e) << 23)
}

// MXFP4RowBytes is the ggml-layout size of a row of cols elements (a
// multiple of 32).
func MXFP4RowBytes(cols int) int { return cols / MXFP4Block * MXFP4BlockBytes }

// DequantizeMXFP4 decodes ggml-layout MXFP4 blocks into out (len(out)
// values, a multiple of 32).
func DequantizeMXFP4(out []float32, q []byte) {
	for b := 0; b < len(out)/MXFP4Block; b++ {
		blk := q[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]
		d := E8M0ToF32(blk[0])
		o := out[b*MXFP4Block : (b+1)*MXFP4Block]
		for j := 0; j < 16; j++ {
			o[j] = fp4Values[blk[1+j]&0xF] * d
			o[j+16] = fp4Values[blk[1+j]>>4] * d
		}
	}
}

// DequantizeMXFP4Split decodes gpt-oss's safetensors layout: blocks holds
// 16 bytes per block (element 2j in the low nibble of byte j, 2j+1 in the
// high), scales one E8M0 byte per block. len(out) is a multiple of 32.
func DequantizeMXFP4Split(out []float32, blocks, scales []byte) {
	for b := 0; b < len(out)/MXFP4Block; b++ {
		d := E8M0ToF32(scales[b])
		blk := blocks[b*16 : (b+1)*16]
		o := out[b*MXFP4Block : (b+1)*MXFP4Block]
		for j := 0; j < 16; j++ {
			o[2*j] = fp4Values[blk[j]&0xF] * d
			o[2*j+1] = fp4Values[blk[j]>>4] * d
		}
	}
}

// MXFP4FromSplit repacks gpt-oss's safetensors layout (blocks: 16 bytes per
// block, scales: one byte per block) into ggml's layout in dst, losslessly;
// dst must hold exactly len(scales) blocks.
func MXFP4FromSplit(dst, blocks, scales []byte) error {
	if len(blocks) != 16*len(scales) {
		return fmt.Errorf("repack mxfp4: %d block bytes for %d scales, want 16 per scale", len(blocks), len(scales))
	}
	if len(dst) != len(scales)*MXFP4BlockBytes {
		return fmt.Errorf("repack mxfp4: %d bytes for %d blocks, want %d", len(dst), len(scales), len(scales)*MXFP4BlockBytes)
	}
	for b, e := range scales {
		src := blocks[b*16 : (b+1)*16]
		d := dst[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]
		d[0] = e
		// Element i sits in src[i/2], low nibble when i is even: read as a
		// little-endian word, src[0:8] holds elements 0–15 as its nibbles
		// 0–15 and src[8:16] elements 16–31. ggml puts element j (< 16) in
		// the low nibble of d[1+j], 16+j in the high: spread each word's
		// nibbles one per byte and merge the two.
		lo, hi := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[8:])
		binary.LittleEndian.PutUint64(d[1:], spreadNibbles(uint32(lo))|spreadNibbles(uint32(hi))<<4)
		binary.LittleEndian.PutUint64(d[9:], spreadNibbles(uint32(lo>>32))|spreadNibbles(uint32(hi>>32))<<4)
	}
	return nil
}

// spreadNibbles moves nibble n of x to the low nibble of byte n.
func spreadNibbles(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	v = (v | v<<8) & 0x00FF00FF00FF00FF
	return (v | v<<4) & 0x0F0F0F0F0F0F0F0F
}

// QuantizeMXFP4 encodes xs (a multiple of 32 values) in ggml's layout as
// the OCP specification's reference conversion does: the shared exponent
// is floor(log2(max|x|)) - 2 (2 being E2M1's largest exponent), and each
// element is x/scale rounded to the nearest E2M1 value, ties to even,
// saturating at ±6. A block of zeros (or of values too small to scale)
// gets scale byte 0.
func QuantizeMXFP4(xs []float32) []byte {
	out := make([]byte, MXFP4RowBytes(len(xs)))
	for b := 0; b < len(xs)/MXFP4Block; b++ {
		x := xs[b*MXFP4Block : (b+1)*MXFP4Block]
		amax := float32(0)
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		e := 0
		if amax > 0 && !math.IsInf(float64(amax), 0) {
			_, exp := math.Frexp(float64(amax)) // amax = frac × 2^exp, frac in [0.5, 1)
			e = min(max(exp-1-2+127, 0), 254)
		}
		d := float64(E8M0ToF32(uint8(e)))
		dst := out[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]
		dst[0] = uint8(e)
		for j := 0; j < 16; j++ {
			dst[1+j] = fp4Encode(float64(x[j])/d) | fp4Encode(float64(x[j+16])/d)<<4
		}
	}
	return out
}

// fp4Encode rounds v to the nearest E2M1 code, ties to the even mantissa,
// saturating at ±6.
func fp4Encode(v float64) uint8 {
	var sign uint8
	if math.Signbit(v) {
		sign, v = 8, -v
	}
	best := uint8(0)
	for c := uint8(1); c < 8; c++ {
		dc, db := math.Abs(v-float64(fp4Values[c])), math.Abs(v-float64(fp4Values[best]))
		if dc < db || (dc == db && c&1 == 0) {
			best = c
		}
	}
	return sign | best
}
