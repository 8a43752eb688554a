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

func TestQ5K(t *testing.T) {
	q := make([]byte, Q5KBlockBytes)
	binary.LittleEndian.PutUint16(q, F32ToF16(0.5))
	binary.LittleEndian.PutUint16(q[2:], F32ToF16(0.25))
	s, qh, qs := q[4:16], q[16:48], q[48:]
	// sub-block 0: scale 2, min 4; sub-block 1: scale 3, min 0
	s[0], s[4] = 2, 4
	s[1], s[5] = 3, 0
	// sub-block 7: scale = s[11]&15 | (s[3]>>6)<<4, min = s[11]>>4 | (s[7]>>6)<<4
	s[11] = 0x52 // scale low 2, min low 5
	s[3] = 0xc0  // scale high 3 -> 50
	s[7] = 0x40  // min high 1 -> 21
	qs[0] = 0x9c // element 0 low nibble 12, element 32 high nibble 9
	qh[0] = 0x03 // element 0 fifth bit (bit 0), element 32 fifth bit (bit 1)
	qs[96+31] = 0xf0
	qh[31] = 0x80 // element 255: group 3 high nibble 15, bit 7 -> 31
	out := make([]float32, QKBlock)
	DequantizeQ5K(out, q)
	for _, c := range []struct {
		i    int
		want float32
	}{
		{0, 0.5*2*(12+16) - 0.25*4}, // 27
		{32, 0.5*3*(9+16) - 0},      // 37.5
		{1, 0.5*2*0 - 0.25*4},       // -1
		{255, 0.5*50*31 - 0.25*21},  // 769.75
		{224, 0.5*50*0 - 0.25*21},   // element 224: group 3 high half, l=0
	} {
		if out[c.i] != c.want {
			t.Errorf("out[%d] = %v, want %v", c.i, out[c.i], c.want)
		}
	}
}

func TestHalfRows(t *testing.T) {
	for _, c := range []struct {
		name string
		dec  func([]float32, []byte)
		in   []uint16
		want []float32
	}{
		{"f16", DequantizeF16, []uint16{0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000}, []float32{1, -2, 5.9604645e-8, 65504, 0}},
		{"bf16", DequantizeBF16, []uint16{0x3f80, 0xc000, 0x4049, 0x0000}, []float32{1, -2, 3.140625, 0}},
	} {
		data := make([]byte, 2*len(c.in))
		for i, h := range c.in {
			binary.LittleEndian.PutUint16(data[2*i:], h)
		}
		out := make([]float32, len(c.in))
		c.dec(out, data)
		for i := range out {
			if out[i] != c.want[i] {
				t.Errorf("%s [%d] = %v, want %v", c.name, i, out[i], c.want[i])
			}
		}
	}
}
