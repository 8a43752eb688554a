package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// encoders pairs each encoder with its decoder, its block length and the
// largest error allowed relative to the block's largest magnitude.
var encoders = []struct {
	name  string
	block int
	enc   func([]byte, []float32) []byte
	dec   func([]float32, []byte)
	bytes int
	// rel bounds |x - decode(encode(x))| / max|x| over a block.
	rel float64
}{
	{"Q4_0", 32, AppendQ4_0, DequantizeQ4_0, Q4_0BlockBytes, 1.0 / 8},
	{"Q4_K", 256, AppendQ4K, DequantizeQ4K, Q4KBlockBytes, 2.0 / 15},
	{"Q5_K", 256, AppendQ5K, DequantizeQ5K, Q5KBlockBytes, 2.0 / 31},
	{"Q6_K", 256, AppendQ6K, DequantizeQ6K, Q6KBlockBytes, 2.0 / 31},
}

func TestEncodersRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	inputs := map[string]func(i int) float32{
		"normal":   func(int) float32 { return float32(0.02 * r.NormFloat64()) },
		"positive": func(int) float32 { return float32(r.Float64()) },
		"negative": func(int) float32 { return -float32(r.Float64()) * 3 },
		"zeros":    func(int) float32 { return 0 },
		"outlier": func(i int) float32 {
			if i%97 == 0 {
				return 5
			}
			return float32(0.01 * r.NormFloat64())
		},
	}
	for _, e := range encoders {
		for name, gen := range inputs {
			t.Run(e.name+"/"+name, func(t *testing.T) {
				x := make([]float32, 4*256)
				for i := range x {
					x[i] = gen(i)
				}
				q := e.enc(nil, x)
				if len(q) != len(x)/e.block*e.bytes {
					t.Fatalf("%d bytes, want %d", len(q), len(x)/e.block*e.bytes)
				}
				y := make([]float32, len(x))
				e.dec(y, q)
				var sse, ssx float64
				for b := 0; b < len(x); b += e.block {
					var amax float64
					for _, v := range x[b : b+e.block] {
						amax = math.Max(amax, math.Abs(float64(v)))
					}
					for i := b; i < b+e.block; i++ {
						d := math.Abs(float64(x[i] - y[i]))
						if d > e.rel*amax+1e-7 {
							t.Fatalf("value %d: %v decodes to %v (|Δ| %g > %g·max|x| = %g)", i, x[i], y[i], d, e.rel, e.rel*amax)
						}
						sse += d * d
						ssx += float64(x[i]) * float64(x[i])
					}
				}
				t.Logf("relative RMS error %.4f", math.Sqrt(sse/math.Max(ssx, 1e-30)))
			})
		}
	}
}

// FuzzEncoders encodes arbitrary finite floats with every encoder and
// checks the blocks decode to finite values within the encoder's bound
// (inputs stay within the range float16 scales can express).
func FuzzEncoders(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 192}, float32(1))
	f.Add(make([]byte, 64), float32(0))
	f.Fuzz(func(t *testing.T, seed []byte, scale float32) {
		if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) || math.Abs(float64(scale)) > 1e4 {
			return
		}
		x := make([]float32, 256)
		for i := range x {
			if len(seed) >= 4 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(seed[(4*i)%(len(seed)-3):]))
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 1e4 {
					v = 0
				}
				// float16 scales overflow beyond ±65504·8 (in ggml too)
				if x[i] = v * scale; math.Abs(float64(x[i])) > 1e5 {
					x[i] = 0
				}
			}
		}
		for _, e := range encoders {
			y := make([]float32, len(x))
			e.dec(y, e.enc(nil, x))
			var amax float64
			for _, v := range x {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for i, v := range y {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: value %d decodes to %v", e.name, i, v)
				}
				// float16 super-scales underflow for blocks below ~2.4e-4 (Q6_K: 31·127·6e-8)
				if d := math.Abs(float64(x[i] - v)); d > e.rel*amax*1.01+3e-4 {
					t.Fatalf("%s: value %d: %v decodes to %v", e.name, i, x[i], v)
				}
			}
		}
	})
}
