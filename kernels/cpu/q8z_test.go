package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestQ8Z checks MatMul on Q8_0 and Q4_0 weights with the 4×16 VNNI tiles
// (kern.q8z, q8z.go) against the transposed VNNI tiles (q8z off) and the
// AVX2 tiles (vnni off), bit for bit, on batches of 1–137 rows (whole groups of 16, a
// last group of 8, padded and leftover rows), weight row counts that leave
// 0–3 rows past the blocks of 4, reductions of 4k blocks and of others
// (which take the old tiles; Q4_0's past q4zMaxBlocks too), random and
// saturated blocks (Q8_0 weights all −128 or +127, Q4_0 nibbles all 0 or
// 15, against activations ±127).
func TestQ8Z(t *testing.T) {
	if !hasVNNI || !hasAVX2 {
		t.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 16))
	const maxN = 137
	for _, c := range []struct {
		dt      kernels.DType
		out, in int
		sat     bool
	}{
		{kernels.Q8_0, 4, 128, false}, {kernels.Q8_0, 9, 256, false}, {kernels.Q8_0, 7, 384, false},
		{kernels.Q8_0, 13, 96, false}, {kernels.Q8_0, 6, 2048, false}, {kernels.Q8_0, 5, 512, true},
		{kernels.Q8_0, 4, 128, true},
		{kernels.Q4_0, 4, 128, false}, {kernels.Q4_0, 9, 256, false}, {kernels.Q4_0, 7, 384, false},
		{kernels.Q4_0, 13, 96, false}, {kernels.Q4_0, 6, 2048, false}, {kernels.Q4_0, 5, 512, true},
		{kernels.Q4_0, 4, 128, true}, {kernels.Q4_0, 3, 8320, false},
	} {
		t.Run(fmt.Sprintf("%v/%dx%d/sat=%v", c.dt, c.out, c.in, c.sat), func(t *testing.T) {
			data := randBlocks(r, c.dt, c.out, c.in)
			x := randF(r, maxN*c.in)
			if c.sat {
				rb := c.dt.RowBytes(c.in)
				bb := rb / (c.in / 32)
				for o := 0; o < c.out; o++ {
					for b := 0; b < c.in/32; b++ {
						blk := data[o*rb+bb*b : o*rb+bb*(b+1)]
						for j := 2; j < bb; j++ {
							blk[j] = 0x80 // Q8_0 −128; Q4_0 nibbles 0 and 8
							if c.dt == kernels.Q4_0 {
								blk[j] = 0
							}
							if (o+b)%2 == 1 {
								blk[j] = 0x7f // Q8_0 +127
								if c.dt == kernels.Q4_0 {
									blk[j] = 0xff
								}
							}
						}
					}
				}
				for m := 0; m < maxN; m++ {
					for j := range c.in {
						x[m*c.in+j] = float32(1 - 2*((m+j/32)&1)) // ±1 per block: q = ±127
					}
				}
			}
			w, err := kernels.NewHostWeight(c.dt, c.out, c.in, bytes.Clone(data))
			if err != nil {
				t.Fatal(err)
			}
			variants := []func(*Backend){
				func(b *Backend) {},                                   // q8z
				func(b *Backend) { b.k.q8z = false },                  // transposed ×8
				func(b *Backend) { b.k.q8z, b.k.vnni = false, false }, // AVX2
			}
			bs := make([]*Backend, len(variants))
			for i, v := range variants {
				bs[i] = New(Options{Threads: 2, QuantizeActivations: true})
				defer bs[i].Close()
				v(bs[i])
			}
			if !bs[0].k.q8z {
				t.Skip("q8z off on this machine")
			}
			for n := 1; n <= maxN; n++ {
				xh := &kernels.Host{R: n, C: c.in, F: x[:n*c.in]}
				var got [3][]float32
				for i, b := range bs {
					o := b.Alloc(n, c.out).(*kernels.Host)
					b.MatMul(o, xh, w, n)
					got[i] = o.F[:n*c.out]
				}
				for i := 1; i < 3; i++ {
					for j, v := range got[0] {
						if math.Float32bits(v) != math.Float32bits(got[i][j]) {
							t.Fatalf("n=%d row %d col %d: q8z %v, variant %d %v", n, j/c.out, j%c.out, v, i, got[i][j])
						}
					}
				}
			}
		})
	}
}

// TestTransposeQ16 checks actQ.qz and actQ.dz against actQ.q and actQ.d,
// with the Go loop alone and with transposeQ16Z (AVX-512) on whole chunks
// of 64 bytes: rows of whole chunks, of chunks and a rest, of less than one.
func TestTransposeQ16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 16))
	for _, c := range []struct {
		n, k int
		simd bool
	}{
		{8, 256, false}, {16, 256, false}, {40, 256, false}, {48, 256, false}, {16, 96, false},
		{8, 256, true}, {16, 256, true}, {40, 256, true}, {48, 2048, true}, {16, 96, true},
		{32, 32, true}, {16, 2080, true}, {64, 8192, true},
	} {
		if c.simd && !hasAVX512 {
			continue
		}
		// (sz checked against sums8's, which the Q4_0 ×8 tiles read)
		n, k := c.n, c.k
		var a actQ
		a.quantize(kern{avx2: hasAVX2}, randF(r, n*k), k, n, k, 32)
		a.transposeQ16(c.simd)
		nb := k / 32
		if len(a.qz) != n/16*nb*512 || len(a.dz) != n/16*nb*16 {
			t.Fatalf("n=%d: len qz %d, dz %d", n, len(a.qz), len(a.dz))
		}
		for i, b := range a.qz {
			g, rest := i/(nb*512), i%(nb*512)
			blk, j, row, c := rest/512, rest/64%8, rest/4%16, rest%4
			if q := a.q[(16*g+row)*k+32*blk+4*j+c]; b != uint8(q)^0x80 {
				t.Fatalf("n=%d: qz[%d] = %d, want %d+128", n, i, b, q)
			}
		}
		a.sums8()
		for i, d := range a.dz {
			g, rest := i/(nb*16), i%(nb*16)
			row, b := 16*g+rest%16, rest/16
			if want := a.d[row*nb+b]; d != want {
				t.Fatalf("n=%d: dz[%d] = %v, want %v", n, i, d, want)
			}
			if want := a.s8[(row/8*nb+b)*8+row%8]; a.sz[i] != want {
				t.Fatalf("n=%d: sz[%d] = %v, want %v", n, i, a.sz[i], want)
			}
		}
	}
}

// TestZOnlyLayouts checks that derive skips the ×8 tiles' transposition
// (actQ.qt) exactly when zOnly leaves no rows to those tiles (whole groups
// of 16 rows, weight rows in blocks of 4, a reduction the 4×16 tiles take),
// that takesQ8Z then still holds, and that a later weight needing it gets it.
func TestZOnlyLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 16))
	k8 := kern{avx2: hasAVX2, vnni: true, q8z: true} // (derive is Go: no VNNI needed)
	for _, c := range []struct {
		dt         kernels.DType
		n, k, wr   int
		wantSkipQT bool
	}{
		{kernels.Q8_0, 16, 128, 8, true}, {kernels.Q8_0, 48, 256, 4, true},
		{kernels.Q8_0, 24, 128, 8, false}, {kernels.Q8_0, 8, 128, 8, false}, // a group of 8 left
		{kernels.Q8_0, 16, 128, 6, false}, {kernels.Q8_0, 16, 128, 0, false}, // rows past blocks of 4; unknown
		{kernels.Q8_0, 16, 96, 8, false}, // 3 blocks
		{kernels.Q8_0, 16, 32 * (q8zMaxBlocks + 4), 8, false},
		{kernels.Q4_0, 32, 256, 12, true}, {kernels.Q4_0, 16, 32 * (q4zMaxBlocks + 4), 8, false},
		{kernels.Q4_K, 16, 256, 8, false},
	} {
		var a actQ
		a.quantizeFor(k8, c.dt, randF(r, c.n*c.k), c.k, c.n, c.k, c.n, c.wr)
		if got := a.built&layQT == 0 && tileLayouts(k8, c.dt)&layQT != 0; got != c.wantSkipQT || got != zOnly(c.dt, c.n, c.k, 32, c.wr) {
			t.Fatalf("%v n=%d k=%d wr=%d: qt skipped %v, want %v", c.dt, c.n, c.k, c.wr, got, c.wantSkipQT)
		}
		if !c.wantSkipQT {
			continue
		}
		w := &kernels.Host{DT: c.dt, R: c.wr, C: c.k}
		if tk := (&qmatTask{k: k8, w: w, n: c.n, act: a}); !tk.takesQ8Z() {
			t.Fatalf("%v n=%d k=%d wr=%d: takesQ8Z false without qt", c.dt, c.n, c.k, c.wr)
		}
		a.derive(k8, c.dt, c.wr+2) // rows past the blocks of 4: the ×8 tiles' rows too
		if len(a.qt) != c.n/8*(c.k/32)*256 {
			t.Fatalf("%v n=%d: qt has %d bytes after a weight of %d rows", c.dt, c.n, len(a.qt), c.wr+2)
		}
	}
}

// BenchmarkTransposeQ16 times actQ.transposeQ16 on 16 rows of the 1B
// model's reductions (2048 and 8192 values), the Go loop and transposeQ16Z
// (AVX-512) alternated in each run; ns/row is per activation row.
func BenchmarkTransposeQ16(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 on this machine or build")
	}
	r := rand.New(rand.NewPCG(3, 17))
	for _, k := range []int{2048, 8192} {
		b.Run(fmt.Sprintf("n16/k%d", k), func(b *testing.B) {
			const n = 16
			var a actQ
			a.quantizeRows(kern{avx2: hasAVX2}, randF(r, n*k), k, n, k, 32)
			var cpu [2]float64
			for i := 0; i < b.N; i++ {
				for v := range 2 {
					c0 := processCPU()
					for range 64 {
						a.transposeQ16(v == 1)
					}
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v, name := range []string{"go", "avx512"} {
				b.ReportMetric(cpu[v]/float64(b.N*64*n)*1e9, name+"-ns/row")
			}
		})
	}
}

// TestQ8ZAllocs checks that MatMul on Q8_0 and Q4_0 weights through the
// 4×16 tiles allocates nothing once its buffers have grown.
func TestQ8ZAllocs(t *testing.T) {
	if !hasVNNI || !hasAVX2 {
		t.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(5, 16))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, n := range []int{16, 24, 128} {
			w, err := kernels.NewHostWeight(dt, 36, 512, randBlocks(r, dt, 36, 512))
			if err != nil {
				t.Fatal(err)
			}
			b := New(Options{Threads: 2, QuantizeActivations: true})
			xs := [2]*kernels.Host{{R: n, C: 512, F: randF(r, n*512)}, {R: n, C: 512, F: randF(r, n*512)}}
			o := b.Alloc(n, 36)
			i := 0
			run := func() {
				i++
				b.MatMul(o, xs[i%2], w, n)
			}
			run()
			run()
			if a := testing.AllocsPerRun(20, run); a != 0 {
				t.Errorf("%v n=%d: %v allocations per MatMul", dt, n, a)
			}
			b.Close()
		}
	}
}

// FuzzQ8Z feeds arbitrary Q8_0 and Q4_0 weight bytes (scales included) to
// the 4×16 tiles and checks their products against the AVX2 tiles' bit for
// bit (NaN for NaN) on 16 fixed activation rows.
func FuzzQ8Z(f *testing.F) {
	f.Add(false, bytes.Repeat([]byte{0x80}, 4*4*34))
	f.Add(true, bytes.Repeat([]byte{0xff, 0x3c}, 4*4*9))
	f.Fuzz(func(t *testing.T, q4 bool, data []byte) {
		if !hasVNNI || !hasAVX2 {
			t.Skip("no AVX512_VNNI on this machine or build")
		}
		dt := kernels.Q8_0
		if q4 {
			dt = kernels.Q4_0
		}
		const out, in, n = 4, 128, 16
		rb := dt.RowBytes(in)
		w := make([]byte, out*rb)
		copy(w, data)
		for i := range w {
			if i >= len(data) && len(data) > 0 {
				w[i] = data[i%len(data)]
			}
		}
		for o := 0; o < out; o++ {
			// finite scales: a NaN or infinite d_w propagates alike but
			// compares unequal; keep the exponent below 31
			for b := 0; b < in/32; b++ {
				w[o*rb+b*(rb/(in/32))+1] &= 0x7b
			}
		}
		wt, err := kernels.NewHostWeight(dt, out, in, w)
		if err != nil {
			t.Fatal(err)
		}
		x := &kernels.Host{R: n, C: in, F: randF(rand.New(rand.NewPCG(1, 2)), n*in)}
		var got [2][]float32
		for i := range got {
			b := New(Options{Threads: 1, QuantizeActivations: true})
			if i == 1 {
				b.k.q8z, b.k.vnni = false, false
			}
			o := b.Alloc(n, out).(*kernels.Host)
			b.MatMul(o, x, wt, n)
			got[i] = o.F
			b.Close()
		}
		for j, v := range got[0] {
			if math.Float32bits(v) != math.Float32bits(got[1][j]) {
				t.Fatalf("%v [%d]: q8z %v, AVX2 %v", dt, j, v, got[1][j])
			}
		}
	})
}
