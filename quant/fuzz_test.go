package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDecoders decodes fuzzer bytes with every block decoder and checks
// properties that tie them to each other: a Q5_K block whose fifth bits
// are all zero decodes as the Q4_K block with the same scales and nibbles,
// a Q5_K value with its fifth bit set is 16·d·scale above the one without,
// F16 values survive a round trip through float32, and BF16 values are
// the top half of their float32.
func FuzzDecoders(f *testing.F) {
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0x00, 0x3c, 0x00, 0x38, 0xff, 0x80, 0x7f})
	f.Fuzz(func(t *testing.T, seed []byte) {
		if len(seed) == 0 {
			return
		}
		blk := make([]byte, Q5KBlockBytes)
		for i := range blk {
			blk[i] = seed[i%len(seed)] ^ byte(i*7)
		}
		// finite scales
		for _, off := range []int{0, 2} {
			if h := binary.LittleEndian.Uint16(blk[off:]); h&0x7c00 == 0x7c00 {
				binary.LittleEndian.PutUint16(blk[off:], h&^0x4000)
			}
		}
		q4 := make([]byte, Q4KBlockBytes)
		copy(q4, blk[:16])
		copy(q4[16:], blk[48:])
		want := make([]float32, QKBlock)
		DequantizeQ4K(want, q4)
		q5 := append([]byte(nil), blk...)
		clear(q5[16:48])
		got := make([]float32, QKBlock)
		DequantizeQ5K(got, q5)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
				t.Fatalf("Q5_K without fifth bits [%d] = %v, Q4_K %v", i, got[i], want[i])
			}
		}
		DequantizeQ5K(got, blk)
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for i := range got {
			g, l, hi := i/64, i%64/32, i%32
			bit := blk[16+hi] >> (2*g + l) & 1
			sc, _ := scaleMinK4(2*g+l, blk[4:16])
			step := float64(d) * float64(sc) * 16
			if diff := float64(got[i]) - float64(want[i]); bit == 0 && diff != 0 || bit == 1 && math.Abs(diff-step) > 1e-5*math.Abs(step)+1e-6*math.Abs(float64(want[i])) {
				t.Fatalf("Q5_K [%d] fifth bit %d: %v vs %v without it (step %v)", i, bit, got[i], want[i], step)
			}
		}
		half := make([]float32, len(seed)/2)
		DequantizeF16(half, seed)
		bf := make([]float32, len(seed)/2)
		DequantizeBF16(bf, seed)
		for i := range half {
			h := binary.LittleEndian.Uint16(seed[2*i:])
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 { // not NaN
				if back := F32ToF16(half[i]); back != h {
					t.Fatalf("f16 %#04x -> %v -> %#04x", h, half[i], back)
				}
			}
			if math.Float32bits(bf[i]) != uint32(h)<<16 {
				t.Fatalf("bf16 %#04x -> %v", h, bf[i])
			}
		}
	})
}
