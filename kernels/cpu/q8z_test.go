package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
)

// TestQ8Z checks MatMul on Q8_0 and Q4_0 weights with the 4×16 VNNI tiles
// (kern.q8z, q8z.go) against the transposed VNNI tiles (q8z off) and the
// AVX2 tiles (vnni off), bit for bit, on batches of 1–137 rows (whole
// groups of 16, a last group of 8, padded and leftover rows; 16–97 rows
// on the long reductions), weight row counts that leave 0–3 rows past the
// blocks of 4, reductions of 4k blocks and of others (a last 1–3 blocks in
// the tiles' tail: 1, 2, 3, 5 and gpt-oss's 90), and past one call
// (Q4_0's 260, 448, 513, 600; Q8_0's 257, 258, 448, 513, 600: zSlices), random and
// saturated blocks (Q8_0 weights all −128 or +127, Q4_0 nibbles all 0 or
// 15, against activations ±127).
func TestQ8Z(t *testing.T) {
	zLong := []int{16, 17, 24, 31, 32, 48, 64, 97}
	zWide := []int{144, 256, 264}
	if !hasVNNI || !hasAVX2 {
		t.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 16))
	const maxN = 137
	for _, c := range []struct {
		dt      kernels.DType
		out, in int
		sat     bool
		ns      []int // activation rows (nil: 1–maxN)
	}{
		{kernels.Q8_0, 4, 128, false, nil}, {kernels.Q8_0, 9, 256, false, nil}, {kernels.Q8_0, 7, 384, false, nil},
		{kernels.Q8_0, 13, 96, false, nil}, {kernels.Q8_0, 6, 2048, false, nil}, {kernels.Q8_0, 5, 512, true, nil},
		{kernels.Q8_0, 4, 128, true, nil},
		{kernels.Q4_0, 4, 128, false, nil}, {kernels.Q4_0, 9, 256, false, nil}, {kernels.Q4_0, 7, 384, false, nil},
		{kernels.Q4_0, 13, 96, false, nil}, {kernels.Q4_0, 6, 2048, false, nil}, {kernels.Q4_0, 5, 512, true, nil},
		{kernels.Q4_0, 4, 128, true, nil}, {kernels.Q4_0, 3, 8320, false, nil},
		{kernels.Q8_0, 5, 32, false, nil}, {kernels.Q8_0, 8, 64, true, nil}, {kernels.Q8_0, 7, 96, false, nil},
		{kernels.Q8_0, 4, 160, false, nil}, {kernels.Q8_0, 9, 2880, false, nil}, {kernels.Q8_0, 6, 2880, true, nil},
		{kernels.Q8_0, 5, 32 * 448, false, zLong}, {kernels.Q8_0, 4, 32 * 513, true, zLong},
		{kernels.Q8_0, 7, 32 * 600, false, zLong}, {kernels.Q8_0, 5, 32 * 257, false, zLong},
		{kernels.Q8_0, 6, 32 * 258, true, zLong},
		{kernels.Q4_0, 5, 32, false, nil}, {kernels.Q4_0, 8, 64, true, nil}, {kernels.Q4_0, 7, 96, false, nil},
		{kernels.Q4_0, 4, 160, false, nil}, {kernels.Q4_0, 9, 2880, false, nil}, {kernels.Q4_0, 6, 2880, true, nil},
		{kernels.Q4_0, 5, 32 * 260, false, zLong}, {kernels.Q4_0, 4, 32 * 448, true, zLong},
		{kernels.Q4_0, 7, 32 * 513, false, zLong}, {kernels.Q4_0, 4, 32 * 600, true, zLong},
		// spans of more than zAccGroups groups of 16 rows (prefill)
		{kernels.Q8_0, 8, 1536, false, zWide}, {kernels.Q4_0, 8, 2880, false, zWide},
		{kernels.Q8_0, 4, 32 * 600, false, zWide}, {kernels.Q4_0, 4, 32 * 280, false, zWide},
	} {
		t.Run(fmt.Sprintf("%v/%dx%d/sat=%v", c.dt, c.out, c.in, c.sat), func(t *testing.T) {
			data := randBlocks(r, c.dt, c.out, c.in)
			x := randF(r, 264*c.in)
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
			ns := c.ns
			if ns == nil {
				for n := 1; n <= maxN; n++ {
					ns = append(ns, n)
				}
			}
			for _, n := range ns {
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
// of 16 rows, weight rows in blocks of 4, any reduction of whole blocks),
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
		{kernels.Q8_0, 16, 96, 8, true}, {kernels.Q8_0, 32, 2880, 8, true}, // 3 and 90 blocks: the tiles' tail
		{kernels.Q8_0, 16, 32 * (q8zWhole + 1), 8, true}, // slices
		{kernels.Q4_0, 32, 256, 12, true}, {kernels.Q4_0, 16, 32 * (q4zSlice + 4), 8, true},
		{kernels.Q4_0, 16, 2880, 4, true}, {kernels.Q4_0, 16, 14336, 8, true},
		{kernels.Q4_0, 16, 2880, 6, false}, {kernels.Q4_0, 40, 2880, 8, false},
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
// bit (NaN for NaN) on 16 fixed activation rows, over reductions of 1–320
// blocks (nbx: the tiles' tail of 1–3 blocks, and Q4_0's slices past 256).
func FuzzQ8Z(f *testing.F) {
	f.Add(false, uint16(3), bytes.Repeat([]byte{0x80}, 4*4*34))
	f.Add(true, uint16(3), bytes.Repeat([]byte{0xff, 0x3c}, 4*4*9))
	f.Add(false, uint16(89), bytes.Repeat([]byte{0x7f, 0x01}, 4*34))
	f.Add(true, uint16(259), bytes.Repeat([]byte{0x11, 0x3b, 0xf0}, 4*9))
	f.Fuzz(func(t *testing.T, q4 bool, nbx uint16, data []byte) {
		if !hasVNNI || !hasAVX2 {
			t.Skip("no AVX512_VNNI on this machine or build")
		}
		dt := kernels.Q8_0
		if q4 {
			dt = kernels.Q4_0
		}
		const out, n = 4, 16
		in := 32 * (1 + int(nbx)%320)
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

// TestQ8ZTileSlices runs q8zPrep and dotQ8_0x4x16TVNNI (q4zPrep and
// dotQ4_0x4x16TVNNI) directly on 4 weight rows and 16 activation rows over
// reductions of 1–600 blocks, whole and in slices of 1, 2, 5, 8 and 64
// blocks (tails inside the reduction too, accumulators carried in acc),
// against the ×8 transposed tiles (dotQ8_0x8TVNNI, dotQ4_0x8TVNNI) on the
// two groups of 8 rows, bit for bit, random and saturated blocks; the
// output rows are 7 floats apart with the tile's 4 at columns 2–5, and
// nothing else in them, nor past the scratch the preparation owns, is
// written.
func TestQ8ZTileSlices(t *testing.T) {
	if !hasVNNI || !hasAVX512 {
		t.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(21, 16))
	const n, os, col = 16, 7, 2
	sentinel := math.Float32frombits(0x7fc0dead)
	for _, q4 := range []bool{false, true} {
		dt := kernels.Q8_0
		if q4 {
			dt = kernels.Q4_0
		}
		for _, nb := range []int{1, 2, 3, 4, 5, 6, 7, 9, 13, 90, 91, 448, 513, 600} {
			for _, sat := range []bool{false, true} {
				k := 32 * nb
				rb := dt.RowBytes(k)
				w := randBlocks(r, dt, 4, k)
				x := randF(r, n*k)
				if sat {
					for o := 0; o < 4; o++ {
						for b := 0; b < nb; b++ {
							blk := w[o*rb+b*(rb/nb) : o*rb+(b+1)*(rb/nb)]
							for j := 2; j < len(blk); j++ {
								blk[j] = [2][2]byte{{0x80, 0x7f}, {0x00, 0xff}}[b2i(q4)][(o+b)%2]
							}
						}
					}
					for m := 0; m < n; m++ {
						for j := range k {
							x[m*k+j] = float32(1 - 2*((m+j/32)&1))
						}
					}
				}
				var a actQ
				a.quantize(kern{avx2: hasAVX2, vnni: true, q8z: true}, x, k, n, k, 32)
				// reference: the ×8 tiles on each group of 8 rows
				var want [n][4]float32
				for g := 0; g < 2; g++ {
					xt, xd8, s8 := a.qt[g*nb*256:], a.d8[g*nb*16:], a.s8[g*nb*8:]
					for o := 0; o < 4; o++ {
						var acc [8]float32
						if q4 {
							dotQ4_0x8TVNNI(&w[o*rb], &xt[0], &xd8[0], &s8[0], nb, &acc)
						} else {
							dotQ8_0x8TVNNI(&w[o*rb], &xt[0], &xd8[0], nb, &acc)
						}
						for i := 0; i < 8; i++ {
							want[8*g+i][o] = acc[i]
						}
					}
				}
				for _, sl := range []int{0, 1, 2, 5, 8, 64} {
					per := nb
					if sl > 0 {
						per = sl
					}
					out := make([]float32, n*os)
					for i := range out {
						out[i] = sentinel
					}
					acc := make([]float32, 128+16)
					for s := 0; s < nb; s += per {
						c := min(per, nb-s)
						groups := (c + 3) / 4
						used := 4 * groups * 12 // words: 48 bytes per group and row
						if q4 {
							used = 4 * groups * 40 // 160 bytes
						}
						scr := make([]int32, used+16)
						for i := range scr {
							scr[i] = -7
						}
						mode := 0
						if s > 0 {
							mode |= 1
						}
						if s+c == nb {
							mode |= 2
						}
						xt, xd := a.qz[s*512:], a.dz[s*16:]
						if q4 {
							q4zPrep(&w[s*18], rb, c, (*byte)(unsafe.Pointer(&scr[0])))
							dotQ4_0x4x16TVNNI((*byte)(unsafe.Pointer(&scr[0])), &w[0], rb, &xt[0], &xd[0], &a.sz[s*16], c, &out[col], 4*os, &acc[0], mode)
						} else {
							q8zPrep(&w[s*34], rb, c, &scr[0])
							dotQ8_0x4x16TVNNI(&w[s*34], rb, &w[0], &xt[0], &xd[0], &scr[0], c, &out[col], 4*os, &acc[0], mode)
						}
						for i := used; i < len(scr); i++ {
							if scr[i] != -7 {
								t.Fatalf("%v nb=%d slice %d+%d: scratch word %d (of %d used) written", dt, nb, s, c, i, used)
							}
						}
						for i := 128; i < len(acc); i++ {
							if acc[i] != 0 {
								t.Fatalf("%v nb=%d: acc[%d] written", dt, nb, i)
							}
						}
					}
					for i := 0; i < n; i++ {
						for j := 0; j < os; j++ {
							got := out[i*os+j]
							if j < col || j >= col+4 {
								if math.Float32bits(got) != math.Float32bits(sentinel) {
									t.Fatalf("%v nb=%d slices %d: row %d col %d written", dt, nb, sl, i, j)
								}
								continue
							}
							if v := want[i][j-col]; math.Float32bits(got) != math.Float32bits(v) {
								t.Fatalf("%v nb=%d sat=%v slices %d: row %d weight row %d: tile %v, ×8 %v", dt, nb, sat, sl, i, j-col, got, v)
							}
						}
					}
				}
			}
		}
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
