package quant

import "encoding/binary"

// Block sizes of the ggml quantizations.
const (
	Q8_0Block      = 32  // values in a Q8_0 or Q4_0 block
	Q8_0BlockBytes = 34  // f16 d, 32 int8
	Q4_0BlockBytes = 18  // f16 d, 16 bytes of nibbles (32 values)
	Q4KBlockBytes  = 144 // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles (256 values)
	Q6KBlockBytes  = 210 // 128 bytes low nibbles, 64 bytes high bits, 16 int8 scales, f16 d (256 values)
	QKBlock        = 256
)

// DequantizeQ4_0 decodes ggml Q4_0 blocks into out (len(out) values, a
// multiple of 32): value j of a block is (nibble - 8) * d, low nibbles
// first.
func DequantizeQ4_0(out []float32, q []byte) {
	for b := 0; b < len(out)/Q8_0Block; b++ {
		blk := q[b*Q4_0BlockBytes : (b+1)*Q4_0BlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		o := out[b*Q8_0Block : (b+1)*Q8_0Block]
		for j := 0; j < 16; j++ {
			o[j] = float32(int(blk[2+j]&0xf)-8) * d
			o[j+16] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
}

// Q4_0ToQ8_0 re-encodes Q4_0 blocks as Q8_0 blocks. It is lossless: each
// block keeps its scale and its integer values (-8..7) fit in int8.
func Q4_0ToQ8_0(q []byte) []byte {
	nb := len(q) / Q4_0BlockBytes
	out := make([]byte, nb*Q8_0BlockBytes)
	for b := 0; b < nb; b++ {
		src := q[b*Q4_0BlockBytes:]
		dst := out[b*Q8_0BlockBytes:]
		dst[0], dst[1] = src[0], src[1]
		for j := 0; j < 16; j++ {
			dst[2+j] = byte(int8(int(src[2+j]&0xf) - 8))
			dst[2+j+16] = byte(int8(int(src[2+j]>>4) - 8))
		}
	}
	return out
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j from the 12 packed bytes.
func scaleMinK4(j int, s []byte) (uint8, uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return (s[j+4] & 0xf) | ((s[j-4] >> 6) << 4), (s[j+4] >> 4) | ((s[j] >> 6) << 4)
}

// DequantizeQ4K decodes ggml Q4_K super-blocks (256 values each) into out,
// as ggml's dequantize_row_q4_K.
func DequantizeQ4K(out []float32, q []byte) {
	for b := 0; b < len(out)/QKBlock; b++ {
		blk := q[b*Q4KBlockBytes : (b+1)*Q4KBlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales, qs := blk[4:16], blk[16:]
		y := out[b*QKBlock:]
		for j, is := 0, 0; j < QKBlock; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[j+l] = d1*float32(qs[l]&0xf) - m1
				y[j+32+l] = d2*float32(qs[l]>>4) - m2
			}
			qs = qs[32:]
		}
	}
}

// DequantizeQ6K decodes ggml Q6_K super-blocks (256 values each) into out,
// as ggml's dequantize_row_q6_K.
func DequantizeQ6K(out []float32, q []byte) {
	for b := 0; b < len(out)/QKBlock; b++ {
		blk := q[b*Q6KBlockBytes : (b+1)*Q6KBlockBytes]
		ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		y := out[b*QKBlock:]
		for n := 0; n < QKBlock; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int8((ql[l]&0xf)|((qh[l]>>0)&3)<<4) - 32
				q2 := int8((ql[l+32]&0xf)|((qh[l]>>2)&3)<<4) - 32
				q3 := int8((ql[l]>>4)|((qh[l]>>4)&3)<<4) - 32
				q4 := int8((ql[l+32]>>4)|((qh[l]>>6)&3)<<4) - 32
				y[n+l] = d * float32(int8(sc[is])) * float32(q1)
				y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			ql, qh, sc = ql[64:], qh[32:], sc[8:]
		}
	}
}
