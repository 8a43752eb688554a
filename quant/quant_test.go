package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestQ8RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 96)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, 96)
	DequantizeQ8_0(y, QuantizeQ8_0(x))
	for i := range x {
		if d := x[i] - y[i]; d > 0.03 || d < -0.03 {
			t.Fatalf("[%d] %v -> %v", i, x[i], y[i])
		}
	}
	for _, f := range []float32{0, 1, -2.5, 65504, 6.1e-5, 1e-7, 3.14159} {
		if g := F16ToF32(F32ToF16(f)); g != f && (f-g)/f > 1e-3 {
			t.Errorf("f16 round trip %v -> %v", f, g)
		}
	}
}

func TestQ4_0(t *testing.T) {
	q := make([]byte, 2*Q4_0BlockBytes)
	binary.LittleEndian.PutUint16(q, F32ToF16(0.5))
	binary.LittleEndian.PutUint16(q[18:], F32ToF16(-2))
	for j := 0; j < 16; j++ {
		q[2+j] = byte(j) | byte(15-j)<<4
		q[20+j] = 0x8f
	}
	out := make([]float32, 64)
	DequantizeQ4_0(out, q)
	// block 0: low nibble j -> (j-8)*0.5 at j; high nibble 15-j -> (7-j)*0.5 at j+16
	if out[0] != -4 || out[15] != 3.5 || out[16] != 3.5 || out[31] != -4 {
		t.Errorf("block 0: %v", out[:32])
	}
	// block 1: low 0xf -> 7*-2, high 0x8 -> 0
	if out[32] != -14 || out[48] != 0 {
		t.Errorf("block 1: %v", out[32:])
	}
	back := make([]float32, 64)
	DequantizeQ8_0(back, Q4_0ToQ8_0(q))
	for i := range out {
		if back[i] != out[i] {
			t.Fatalf("Q4_0->Q8_0 not lossless at %d: %v vs %v", i, back[i], out[i])
		}
	}
}

func TestQ4K(t *testing.T) {
	q := make([]byte, Q4KBlockBytes)
	binary.LittleEndian.PutUint16(q, F32ToF16(0.25))
	binary.LittleEndian.PutUint16(q[2:], F32ToF16(0.5))
	s := q[4:16]
	// sub-block 0: scale 3, min 1 (low 6 bits of s[0], s[4])
	s[0], s[4] = 3, 1
	// sub-block 5: scale = s[9]&15 | (s[1]>>6)<<4, min = s[9]>>4 | (s[5]>>6)<<4
	s[9] = 0x21 // scale low 1, min low 2
	s[1] = 0x40 // scale high 1 -> 17
	s[5] = 0x80 // min high 2 -> 34
	for i := range q[16:] {
		q[16+i] = 0x5a // low nibble 10, high nibble 5
	}
	out := make([]float32, QKBlock)
	DequantizeQ4K(out, q)
	// element 0: sub-block 0, low nibble: 0.25*3*10 - 0.5*1 = 7
	if out[0] != 7 {
		t.Errorf("out[0] = %v, want 7", out[0])
	}
	// element 160: j=128 group (is=4,5), second half -> sub-block 5, high nibble 5:
	// 0.25*17*5 - 0.5*34 = 4.25
	if out[160] != 4.25 {
		t.Errorf("out[160] = %v, want 4.25", out[160])
	}
}

func TestQ6K(t *testing.T) {
	q := make([]byte, Q6KBlockBytes)
	binary.LittleEndian.PutUint16(q[208:], F32ToF16(0.5))
	ql, qh, sc := q[:128], q[128:192], q[192:208]
	ql[0] = 0x3f // element 0 low 4 bits 15; element 64 low 4 bits 3
	qh[0] = 0x32 // element 0 high bits 2 -> q = 15|32 = 47 -> 15; element 32 bits 0; element 64 bits 3 -> 3|48=51 -> 19
	sc[0], sc[4] = 2, -3&0xff
	out := make([]float32, QKBlock)
	DequantizeQ6K(out, q)
	if out[0] != 0.5*2*15 {
		t.Errorf("out[0] = %v, want 15", out[0])
	}
	if out[64] != 0.5*-3*19 {
		t.Errorf("out[64] = %v, want %v", out[64], 0.5*-3*19)
	}
}
