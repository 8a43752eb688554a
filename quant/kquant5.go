package quant

import "encoding/binary"

// Q5KBlockBytes is the size of a Q5_K super-block: f16 d, f16 dmin, 12
// bytes of 6-bit scales and mins (packed as in Q4_K), 32 bytes holding the
// fifth bit of every value, and 128 bytes of low nibbles (256 values).
const Q5KBlockBytes = 176

// DequantizeQ5K decodes ggml Q5_K super-blocks (256 values each) into out,
// as ggml's dequantize_row_q5_K: the 64-value group g takes its low nibbles
// from qs[32g:32g+32] (low halves first, then high halves) and its fifth
// bits from bit 2g (low halves) and 2g+1 (high halves) of qh[0:32]; value
// = d·scale·q − dmin·min per 32-value sub-block.
func DequantizeQ5K(out []float32, q []byte) {
	for b := 0; b < len(out)/QKBlock; b++ {
		blk := q[b*Q5KBlockBytes : (b+1)*Q5KBlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:]
		y := out[b*QKBlock:]
		u1, u2 := byte(1), byte(2)
		for j, is := 0, 0; j < QKBlock; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				lo, hi := qs[l]&0xf, qs[l]>>4
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
				y[j+l] = float32(d1*float32(lo)) - m1
				y[j+32+l] = float32(d2*float32(hi)) - m2
			}
			qs = qs[32:]
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// DequantizeF16 decodes little-endian IEEE half floats into out (len(out)
// values).
func DequantizeF16(out []float32, data []byte) {
	data = data[:2*len(out)]
	for i := range out {
		out[i] = F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
	}
}

// DequantizeBF16 decodes little-endian bfloat16 values into out (len(out)
// values).
func DequantizeBF16(out []float32, data []byte) {
	data = data[:2*len(out)]
	for i := range out {
		out[i] = BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
	}
}
