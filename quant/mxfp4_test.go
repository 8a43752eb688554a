package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFP4Values checks every E2M1 code against the OCP formula:
// (-1)^S × 2^(E-1) × (1 + M/2) for E > 0, (-1)^S × M/2 for E = 0.
func TestFP4Values(t *testing.T) {
	for c := uint8(0); c < 16; c++ {
		s, e, m := c>>3, (c>>1)&3, c&1
		var want float64
		if e == 0 {
			want = float64(m) / 2
		} else {
			want = math.Ldexp(1+float64(m)/2, int(e)-1)
		}
		if s == 1 {
			want = -want
		}
		got := FP4ToF32(c)
		if float64(got) != want || math.Signbit(float64(got)) != (s == 1) {
			t.Errorf("code %04b: %v, want %v", c, got, want)
		}
	}
}

// TestE8M0 checks all 256 scales against 2^(e-127) (NaN for 0xFF) and, for
// e < 255, against ggml's GGML_E8M0_TO_FP32_HALF × 2.
func TestE8M0(t *testing.T) {
	for e := 0; e < 256; e++ {
		got := E8M0ToF32(uint8(e))
		if e == 255 {
			if !math.IsNaN(float64(got)) {
				t.Errorf("0xFF: %v, want NaN", got)
			}
			continue
		}
		if want := math.Ldexp(1, e-127); float64(got) != want {
			t.Errorf("e=%d: %v, want %v", e, got, want)
		}
		var bits uint32 // ggml-impl.h ggml_e8m0_to_fp32_half
		if e < 2 {
			bits = 0x00200000 << e
		} else {
			bits = uint32(e-1) << 23
		}
		if half := math.Float32frombits(bits); got != 2*half {
			t.Errorf("e=%d: %v, ggml half %v", e, got, half)
		}
	}
}

func TestDequantizeMXFP4(t *testing.T) {
	tests := []struct {
		name string
		blk  []byte
		want []float32
	}{
		{
			name: "scale 1",
			// scale 127 = 1; byte j: low nibble code j (element j), high
			// nibble code 15-j (element 16+j).
			blk: func() []byte {
				b := []byte{127}
				for j := 0; j < 16; j++ {
					b = append(b, byte(j)|byte(15-j)<<4)
				}
				return b
			}(),
			want: []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6,
				-6, -4, -3, -2, -1.5, -1, -0.5, 0, 6, 4, 3, 2, 1.5, 1, 0.5, 0},
		},
		{
			name: "scale 2^-3",
			blk:  append([]byte{124, 0x71}, make([]byte, 15)...),
			want: append(append([]float32{0.0625}, make([]float32, 15)...), append([]float32{0.75}, make([]float32, 15)...)...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]float32, 32)
			DequantizeMXFP4(got, tc.blk)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestMXFP4Split checks gpt-oss's interleaved layout against its reference
// (gpt_oss/torch/weights.py: lo nibble → element 2j, hi → 2j+1, ldexp by
// scale-127), and that MXFP4FromSplit repacks it losslessly.
func TestMXFP4Split(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const nb = 6
	blocks := make([]byte, 16*nb)
	scales := make([]byte, nb)
	for i := range blocks {
		blocks[i] = byte(r.IntN(256))
	}
	for i := range scales {
		scales[i] = byte(100 + r.IntN(54))
	}
	got := make([]float32, 32*nb)
	DequantizeMXFP4Split(got, blocks, scales)
	for b := 0; b < nb; b++ {
		for j := 0; j < 16; j++ {
			lo := math.Ldexp(float64(fp4Values[blocks[16*b+j]&0xF]), int(scales[b])-127)
			hi := math.Ldexp(float64(fp4Values[blocks[16*b+j]>>4]), int(scales[b])-127)
			if float64(got[32*b+2*j]) != lo || float64(got[32*b+2*j+1]) != hi {
				t.Fatalf("block %d byte %d: %v %v, want %v %v", b, j, got[32*b+2*j], got[32*b+2*j+1], lo, hi)
			}
		}
	}
	packed := make([]byte, len(scales)*MXFP4BlockBytes)
	err := MXFP4FromSplit(packed, blocks, scales)
	if err != nil {
		t.Fatal(err)
	}
	again := make([]float32, 32*nb)
	DequantizeMXFP4(again, packed)
	if !slices.Equal(got, again) {
		t.Errorf("repacked ggml blocks decode differently")
	}
	if err := MXFP4FromSplit(make([]byte, MXFP4BlockBytes), blocks[:15], scales[:1]); err == nil {
		t.Error("short blocks accepted")
	}
}

// TestQuantizeMXFP4 checks the encoder: values already on the MXFP4 grid
// survive exactly, and others land within half a step of their block's
// grid (saturating at 6 × scale).
func TestQuantizeMXFP4(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 32*8)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
	}
	x[3], x[40] = 0, float32(math.Copysign(0, -1))
	for i := 64; i < 96; i++ {
		x[i] = 0 // an all-zero block
	}
	q := QuantizeMXFP4(x)
	y := make([]float32, len(x))
	DequantizeMXFP4(y, q)
	for b := 0; b < len(x)/32; b++ {
		d := float64(E8M0ToF32(q[b*MXFP4BlockBytes]))
		for j := b * 32; j < (b+1)*32; j++ {
			// Grid steps are 0.5·d below 2·d, d up to 4·d, 2·d up to 6·d;
			// beyond 6·d (up to 8·d) the element saturates.
			if math.Abs(float64(x[j])) > 6*d {
				if math.Abs(float64(y[j])) != 6*d || math.Signbit(float64(x[j])) != math.Signbit(float64(y[j])) {
					t.Fatalf("[%d] %v -> %v, want ±6×%v", j, x[j], y[j], d)
				}
				continue
			}
			if err := math.Abs(float64(x[j]) - float64(y[j])); err > d+1e-30 {
				t.Fatalf("[%d] %v -> %v (scale %v)", j, x[j], y[j], d)
			}
		}
	}
	if q[2*MXFP4BlockBytes] != 0 || y[64] != 0 {
		t.Errorf("zero block: scale byte %d, value %v", q[2*MXFP4BlockBytes], y[64])
	}
	// On-grid input round-trips exactly.
	z := make([]float32, len(y))
	DequantizeMXFP4(z, QuantizeMXFP4(y))
	if !slices.Equal(y, z) {
		t.Errorf("quantize(dequantize(q)) changed values")
	}
	// Ties go to the even mantissa: 0.25 → 0, 0.75 → 1, 2.5 → 2, 5 → 4.
	for _, tc := range []struct {
		v    float64
		want uint8
	}{{0.25, 0}, {0.75, 2}, {1.25, 2}, {1.75, 4}, {2.5, 4}, {3.5, 6}, {5, 6}, {7, 7}, {100, 7}, {-0.75, 10}, {-5, 14}} {
		if got := fp4Encode(tc.v); got != tc.want {
			t.Errorf("fp4Encode(%v) = %04b, want %04b", tc.v, got, tc.want)
		}
	}
}

// FuzzMXFP4 decodes arbitrary bytes in both layouts and checks that the
// repacked ggml blocks decode to the same values (NaN scales included) and
// that re-encoding the decoded values reproduces them.
func FuzzMXFP4(f *testing.F) {
	f.Add(make([]byte, 17*2))
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nb := len(data) / 17
		if nb == 0 {
			return
		}
		scales, blocks := data[:nb], data[nb:nb*17]
		split := make([]float32, 32*nb)
		DequantizeMXFP4Split(split, blocks, scales)
		packed := make([]byte, len(scales)*MXFP4BlockBytes)
		err := MXFP4FromSplit(packed, blocks, scales)
		if err != nil {
			t.Fatal(err)
		}
		ggml := make([]float32, 32*nb)
		DequantizeMXFP4(ggml, packed)
		for i := range split {
			if math.Float32bits(split[i]) != math.Float32bits(ggml[i]) {
				t.Fatalf("[%d] split %v, ggml %v", i, split[i], ggml[i])
			}
		}
		for _, v := range ggml {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return // NaN scales and 6×2^127 do not re-encode
			}
		}
		again := make([]float32, len(ggml))
		DequantizeMXFP4(again, QuantizeMXFP4(ggml))
		for i := range ggml {
			if again[i] != ggml[i] {
				t.Fatalf("[%d] re-encoded %v -> %v", i, ggml[i], again[i])
			}
		}
	})
}

// TestMXFP4FromSplitBytes checks the repack byte for byte against the
// definition, element by element (every nibble value in every position).
func TestMXFP4FromSplitBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const nb = 64
	blocks, scales := make([]byte, 16*nb), make([]byte, nb)
	for i := range blocks {
		blocks[i] = byte(r.IntN(256))
	}
	for i := range scales {
		scales[i] = byte(r.IntN(256))
	}
	got := make([]byte, nb*MXFP4BlockBytes)
	if err := MXFP4FromSplit(got, blocks, scales); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < nb; b++ {
		elem := func(i int) byte { return blocks[16*b+i/2] >> (4 * (i & 1)) & 0xF }
		want := []byte{scales[b]}
		for j := 0; j < 16; j++ {
			want = append(want, elem(j)|elem(16+j)<<4)
		}
		if g := got[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]; !slices.Equal(g, want) {
			t.Fatalf("block %d: %x, want %x", b, g, want)
		}
	}
}

// BenchmarkMXFP4FromSplit repacks 16 MiB of split blocks (gpt-oss-20b's
// safetensors load repacks 9.6 GB of them).
func BenchmarkMXFP4FromSplit(b *testing.B) {
	const nb = 1 << 20
	blocks, scales, dst := make([]byte, 16*nb), make([]byte, nb), make([]byte, nb*MXFP4BlockBytes)
	for i := range blocks {
		blocks[i] = byte(i * 7)
	}
	b.SetBytes(16 * nb)
	for b.Loop() {
		if err := MXFP4FromSplit(dst, blocks, scales); err != nil {
			b.Fatal(err)
		}
	}
}
