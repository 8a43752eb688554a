package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestHalfPanelZKernels checks every halfPanelZ kernel (one and two
// panels, every width) against the same sums done in plain Go in k order
// with one fused multiply-add per product, on strided panels and
// accumulators, k with every remainder modulo the 4-step unroll, and that
// nothing around the accumulators is written.
func TestHalfPanelZKernels(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 61))
	for _, P := range []int{1, 2} {
		maxW := halfZMaxW1
		if P == 2 {
			maxW = halfZMaxW2
		}
		for W := 1; W <= maxW; W++ {
			for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 13, 256} {
				ws := k + 3          // weight row stride in floats
				xps := 16*k + 16     // panel stride in floats
				accs := 16*maxW + 32 // accumulator panel stride in floats
				w := randF(r, W*ws)
				xp := randF(r, P*xps)
				acc0 := randF(r, P*accs)
				want := slices.Clone(acc0)
				for g := 0; g < P; g++ {
					for c := 0; c < W; c++ {
						for j := 0; j < 16; j++ {
							a := &want[g*accs+16*c+j]
							for i := 0; i < k; i++ {
								*a = float32(math.FMA(float64(xp[g*xps+16*i+j]), float64(w[c*ws+i]), float64(*a)))
							}
						}
					}
				}
				got := slices.Clone(acc0)
				halfPanelZAVX512(P, W, &xp[0], xps, &w[0], ws, k, &got[0], accs)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("P=%d W=%d k=%d acc[%d] = %v, want %v", P, W, k, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestHalfPanelZWiden checks the one-panel kernels that widen as they go
// (halfPanelZWidenAVX512, every width, F16 and BF16, k with a last 8 or
// not) against halfPanelZAVX512 on the rows widened by halfToF32*: the
// same sums bit for bit.
func TestHalfPanelZWiden(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 67))
	for _, dt := range halfTypes {
		for W := 1; W <= halfZMaxW1; W++ {
			for _, k := range []int{8, 16, 24, 40, 256} {
				const ws = 264 // weight row stride in values
				data := randBlocks(r, dt, W, ws)
				sanitizeHalves(dt, data)
				wf := make([]float32, W*ws)
				for c := 0; c < W; c++ {
					if dt == kernels.BF16 {
						halfToF32BF16AVX2(&data[2*c*ws], &wf[c*ws], ws)
					} else {
						halfToF32F16AVX2(&data[2*c*ws], &wf[c*ws], ws)
					}
				}
				xp := randF(r, 16*k)
				acc0 := randF(r, 16*W)
				want := slices.Clone(acc0)
				halfPanelZAVX512(1, W, &xp[0], 16*k, &wf[0], ws, k, &want[0], 16*W)
				got := slices.Clone(acc0)
				var buf [16 * halfZMaxW1]float32
				halfPanelZWidenAVX512(dt == kernels.BF16, W, &xp[0], &data[0], 2*ws, k, &got[0], &buf[0])
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v W=%d k=%d acc[%d] = %v, widened first %v", dt, W, k, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestHalfPanelsZ runs the panel path with the AVX-512 kernels and with
// the AVX2 ones (kern flags forced, on this machine) on ragged shapes —
// batches from 8 to 137 rows (one panel, pairs, an odd panel left), weight
// rows 1–97 and past the 48-row blocks and 384-row ranges, reductions with
// every tail modulo 8 and several chunks — on a sub-range of the weight
// rows: the two agree bit for bit, packed once or per range, meet the
// float64 product within the rounding bound of the summation depth, and
// leave the other rows alone.
func TestHalfPanelsZ(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 62))
	cases := []struct{ n, rows, in int }{
		{8, 1, 8}, {9, 5, 24}, {15, 17, 256}, {16, 97, 264}, {16, 390, 2056}, {17, 13, 513},
		{31, 47, 1031}, {32, 49, 520}, {33, 100, 64}, {48, 61, 136}, {64, 2*halfPanelRange + 7, 40},
		{97, 29, 300}, {128, 96, 2048}, {137, 50, 777},
	}
	for _, dt := range halfTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, c.n, c.rows, c.in), func(t *testing.T) {
				data := randBlocks(r, dt, c.rows, c.in)
				sanitizeHalves(dt, data)
				w, err := kernels.NewHostWeight(dt, c.rows, c.in, data)
				if err != nil {
					t.Fatal(err)
				}
				xf := randF(r, c.n*c.in)
				_, onAct, _, mag := storedRef(w, xf, c.n)
				x := &kernels.Host{R: c.n, C: c.in, F: xf}
				sentinel := float32(math.Inf(-1))
				lo, hi := c.rows/5, c.rows-c.rows/7
				run := func(k kern, packOnce bool) []float32 {
					out := &kernels.Host{R: c.n, C: c.rows, F: make([]float32, c.n*c.rows)}
					for i := range out.F {
						out.F[i] = sentinel
					}
					q := &qmatTask{k: k, out: out, x: x, w: w, n: c.n}
					q.prepareHalf(1)
					if packOnce {
						// packed once per MatMul (one panel or more);
						// without it each range packs its own
						q.packPanels()
						if want := c.n >= halfPanelZMinRows; (q.xpN == c.n) != want {
							t.Fatalf("packPanels packed %d rows, want packed: %v", q.xpN, want)
						}
					}
					q.halfPanels(lo, hi, &q.hp[0])
					return out.F
				}
				z := kern{simd: true, avx2: true}
				got := run(z, false)
				for name, o := range map[string][]float32{"AVX2": run(kern{avx2: true}, false), "packed once": run(z, true)} {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(o[i]) {
							t.Fatalf("[%d,%d] = %v, %s %v", i/c.rows, i%c.rows, got[i], name, o[i])
						}
					}
				}
				for m := 0; m < c.n; m++ {
					for o := 0; o < c.rows; o++ {
						g, j := got[m*c.rows+o], m*c.rows+o
						if o < lo || o >= hi {
							if g != sentinel {
								t.Fatalf("[%d,%d] outside rows [%d,%d) was written: %v", m, o, lo, hi, g)
							}
							continue
						}
						tol := float64(halfPanelDepth(c.in))*0x1p-24*mag[j]*1.01 + 1e-6
						if d := math.Abs(float64(g) - onAct[j]); d > tol {
							t.Fatalf("[%d,%d] = %v, float64 product %v (tol %g)", m, o, g, onAct[j], tol)
						}
					}
				}
			})
		}
	}
}

// TestHalfZMatMul runs whole F16/BF16 MatMuls (1 and 2 threads, batches
// 1–137) through checkHalfZ.
func TestHalfZMatMul(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 63))
	for _, dt := range halfTypes {
		for _, c := range []struct{ n, rows, in int }{
			{1, 97, 64}, {2, 33, 72}, {7, 40, 96}, {8, 64, 520}, {16, 130, 2048 + 64}, {17, 70, 2056}, {128, 100, 520}, {137, 33, 2050},
		} {
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%v/n%d/%dx%d/t%d", dt, c.n, c.rows, c.in, threads), func(t *testing.T) {
					data := randBlocks(r, dt, c.rows, c.in)
					sanitizeHalves(dt, data)
					checkHalfZ(t, dt, data, randF(r, c.n*c.in), c.n, c.rows, c.in, threads)
				})
			}
		}
	}
}

// FuzzHalfZ runs checkHalfZ on weights made from the fuzzer's bytes, any
// batch of 1 to 70 rows, 1 to 70 weight rows and any reduction length up
// to 1200 (every tail, several chunks).
func FuzzHalfZ(f *testing.F) {
	f.Add(false, uint8(15), uint8(17), uint16(100), []byte{1, 2, 3})
	f.Add(true, uint8(32), uint8(2), uint16(1031), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(false, uint8(40), uint8(50), uint16(7), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, bf bool, n8, rows8 uint8, in16 uint16, seed []byte) {
		if !hasAVX512 {
			t.Skip("no AVX-512 kernels on this machine or build")
		}
		dt := kernels.F16
		if bf {
			dt = kernels.BF16
		}
		n, rows, in := int(n8%70)+1, int(rows8%70)+1, int(in16%1200)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(in)))
		data := randBlocks(r, dt, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(dt, data)
		checkHalfZ(t, dt, data, randF(r, n*in), n, rows, in, 2)
	})
}

// checkHalfZ runs the F16/BF16 MatMul of x (n rows) by the weight rows in
// data on a backend with AVX-512 and on the same backend with the AVX-512
// flag cleared (the AVX2 kernels every machine without AVX-512 runs):
// both within the float64 product's rounding bound, and equal bit for bit
// wherever both run on the panel path.
func checkHalfZ(t *testing.T, dt kernels.DType, data []byte, xf []float32, n, rows, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(dt, rows, in, data)
	if err != nil {
		t.Fatal(err)
	}
	_, onAct, _, mag := storedRef(w, xf, n)
	x := &kernels.Host{R: n, C: in, F: xf}
	var outs [2][]float32
	for i, simd := range []bool{true, false} {
		b := New(Options{Threads: threads})
		b.k.simd = simd
		out := b.Alloc(n, rows).(*kernels.Host)
		b.MatMul(out, x, w, n)
		b.Close()
		outs[i] = out.F
		for j, g := range out.F {
			tol := max(float64(halfPanelDepth(in)), float64(in/2+2))*0x1p-24*mag[j]*1.01 + 1e-6
			if d := math.Abs(float64(g) - onAct[j]); d > tol {
				t.Fatalf("simd=%v [%d,%d] = %v, float64 product %v (tol %g)", simd, j/rows, j%rows, g, onAct[j], tol)
			}
		}
	}
	z, a := &qmatTask{k: kern{simd: true, avx2: true}}, &qmatTask{k: kern{avx2: true}}
	if z.panels(dt, n, in) && a.panels(dt, n, in) && in >= 8 {
		for j := range outs[0] {
			if math.Float32bits(outs[0][j]) != math.Float32bits(outs[1][j]) {
				t.Fatalf("[%d,%d]: AVX-512 %v, AVX2 %v", j/rows, j%rows, outs[0][j], outs[1][j])
			}
		}
	}
}

// TestHalfZAllocs checks that MatMuls on the AVX-512 paths (one panel,
// several packed once per MatMul, and the halfSmall tiles of 2–7 rows)
// allocate nothing once the scratch has grown.
func TestHalfZAllocs(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 64))
	for _, c := range []struct {
		dt          kernels.DType
		n, rows, in int
	}{{kernels.F16, 16, 200, 520}, {kernels.BF16, 16, 200, 520}, {kernels.F16, 40, 100, 264}, {kernels.F16, 2, 200, 520}, {kernels.BF16, 5, 200, 524}, {kernels.F16, 7, 200, 2048}} {
		t.Run(fmt.Sprintf("%v/n%d", c.dt, c.n), func(t *testing.T) {
			data := randBlocks(r, c.dt, c.rows, c.in)
			sanitizeHalves(c.dt, data)
			w, err := kernels.NewHostWeight(c.dt, c.rows, c.in, data)
			if err != nil {
				t.Fatal(err)
			}
			be := New(Options{Threads: 2})
			defer be.Close()
			x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
			out := be.Alloc(c.n, c.rows)
			be.MatMul(out, x, w, c.n)
			if a := testing.AllocsPerRun(20, func() {
				x.F[0]++
				be.MatMul(out, x, w, c.n)
			}); a != 0 {
				t.Errorf("%v allocations per call", a)
			}
		})
	}
}

// TestHalfZPanels pins which batches run on the panel path with AVX-512:
// F16 and BF16 from halfPanelZMinRows rows at any K; without AVX-512
// usePanels decides.
func TestHalfZPanels(t *testing.T) {
	z, a := &qmatTask{k: kern{simd: true, avx2: true}}, &qmatTask{k: kern{avx2: true}}
	for _, c := range []struct {
		dt      kernels.DType
		n, k    int
		z, avx2 bool
	}{
		{kernels.F16, halfPanelZMinRows - 1, 2048, false, false},
		{kernels.F16, halfPanelZMinRows, 64, true, false},
		{kernels.F16, 16, 8192, true, false},
		{kernels.F16, 128, halfKc, true, false},
		{kernels.F16, 128, halfKc + 8, true, true},
		{kernels.BF16, 16, 2048, true, true},
		{kernels.F32, 128, 8192, false, false},
		{kernels.Q8_0, 128, 8192, false, false},
	} {
		if got := z.panels(c.dt, c.n, c.k); got != c.z {
			t.Errorf("AVX-512 panels(%v, %d, %d) = %v, want %v", c.dt, c.n, c.k, got, c.z)
		}
		if got := a.panels(c.dt, c.n, c.k); got != c.avx2 {
			t.Errorf("AVX2 panels(%v, %d, %d) = %v, want %v", c.dt, c.n, c.k, got, c.avx2)
		}
	}
}

// BenchmarkHalfPanelZL1 times the halfPanelZ kernels on one chunk of
// halfPanelKc values, panels and widened weights in L1, on one thread:
// the kernels' arithmetic alone (compare with the AVX-512 FMA peak,
// internal/peak BenchmarkF32FMAZ, and BenchmarkHalfPanelL1).
func BenchmarkHalfPanelZL1(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 65))
	for _, s := range [][2]int{{1, halfZMaxW1}, {1, 12}, {1, 8}, {2, halfZMaxW2}, {2, 8}} {
		P, W := s[0], s[1]
		b.Run(fmt.Sprintf("%dx%d", P, W), func(b *testing.B) {
			kc := halfPanelKc
			xp := randF(r, P*16*kc)
			w := randF(r, W*kc)
			acc := make([]float32, P*16*W)
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				halfPanelZAVX512(P, W, &xp[0], 16*kc, &w[0], kc, kc, &acc[0], 16*W)
			}
			if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
				b.ReportMetric(float64(P*16*W*kc)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
			}
		})
	}
}

// BenchmarkHalfZPaths times one thread's share of F16/BF16 MatMuls at the
// 1B shapes as main dispatches them without AVX-512 ("avx2": the register
// tiles or the AVX2 panels, as usePanels picks) and on the AVX-512 paths
// ("z": the panels, or the halfSmall tiles below halfPanelZMinRows rows),
// alternately in one process.
func BenchmarkHalfZPaths(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 66))
	for _, dt := range halfTypes {
		for _, s := range halfBenchShapes {
			for _, n := range []int{2, 4, 6, 16, 128} {
				data := randBlocks(r, dt, s.out, s.in)
				w, err := kernels.NewHostWeight(dt, s.out, s.in, data)
				if err != nil {
					b.Fatal(err)
				}
				x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
				out := &kernels.Host{R: n, C: s.out, F: make([]float32, n*s.out)}
				for _, path := range []string{"avx2", "z"} {
					b.Run(fmt.Sprintf("%v/%dx%d/n%d/%s", dt, s.out, s.in, n, path), func(b *testing.B) {
						k := kern{avx2: true, simd: path == "z"}
						t := &qmatTask{k: k, out: out, x: x, w: w, n: n}
						t.prepareHalf(1)
						b.ResetTimer()
						c0 := processCPU()
						for i := 0; i < b.N; i++ {
							t.packPanels()
							t.run(0, s.out, 0)
						}
						if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
							b.ReportMetric(float64(n*s.out*s.in)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
						}
					})
				}
			}
		}
	}
}

// BenchmarkHalfPanelZWidenWhere times the one-panel path's kernel loop (as
// halfPanelRows runs it for 16 activation rows: 16 weight rows at a time,
// each streaming through K = 2048 in chunks of halfPanelKc values) on one
// thread with the weights in L1 (16 rows, 64 KiB of F16 or BF16: mostly
// L1 and L2), in L2 (256 rows, 1 MiB) and from memory (distinct copies of
// at least streamBytes), the activations packed once: the GMAC per
// CPU-second the kernel keeps where its weights come from.
func BenchmarkHalfPanelZWidenWhere(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	const K, W = 2048, halfZMaxW1
	r := rand.New(rand.NewPCG(17, 68))
	xp := randF(r, 16*K)
	acc := make([]float32, 2*16*W)
	var buf [16 * halfZMaxW1]float32
	for _, dt := range halfTypes {
		for _, where := range []struct {
			name string
			rows int
		}{{"L1", W}, {"L2", 256}, {"mem", streamBytes / (2 * K)}} {
			b.Run(fmt.Sprintf("%v/%s", dt, where.name), func(b *testing.B) {
				data := randBlocks(r, dt, where.rows, K)
				sanitizeHalves(dt, data)
				rb := 2 * K
				b.ResetTimer()
				c0 := processCPU()
				o := 0
				for i := 0; i < b.N; i++ {
					for kb, ci := 0, 0; kb < K; kb, ci = kb+halfPanelKc, ci+1 {
						a := acc[(ci&1)*16*W:]
						halfPanelZWidenAVX512(dt == kernels.BF16, W, &xp[16*kb], &data[o*rb+2*kb], rb, halfPanelKc, &a[0], &buf[0])
					}
					if o += W; o+W > where.rows {
						o = 0
					}
				}
				if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
					b.ReportMetric(float64(16*W*K)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
				}
			})
		}
	}
}

// TestHalfPanelSumsZ checks the AVX-512 16 × 16 transpose of the panel
// path's last step against the sums in Go for 16–64 weight rows (every
// output row, nothing past the r columns written).
func TestHalfPanelSumsZ(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 69))
	for _, R := range []int{16, 32, 48, 64} {
		const oc, lo = 100, 3
		a0, a1 := randF(r, 16*R), randF(r, 16*R)
		out := make([]float32, 16*oc)
		for i := range out {
			out[i] = float32(math.Inf(-1))
		}
		halfPanelSumsAVX512(&out[lo], oc, &a0[0], &a1[0], R)
		for j := 0; j < 16; j++ {
			for c := 0; c < oc; c++ {
				got := out[j*oc+c]
				if i := c - lo; i < 0 || i >= R {
					if !math.IsInf(float64(got), -1) {
						t.Fatalf("R=%d out[%d][%d] written: %v", R, j, c, got)
					}
				} else if want := a0[16*i+j] + a1[16*i+j]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("R=%d out[%d][%d] = %v, want %v", R, j, c, got, want)
				}
			}
		}
	}
}

// BenchmarkHalfPanelSumsZ times the panel path's last step for one panel
// of 16 rows and 384 weight rows into an output 2048 wide: the AVX-512
// transpose and the Go loop it replaces on whole panels, in ns per value.
func BenchmarkHalfPanelSumsZ(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	const R, oc = halfPanelRange, 2048
	r := rand.New(rand.NewPCG(17, 70))
	a0, a1 := randF(r, 16*R), randF(r, 16*R)
	out := make([]float32, 16*oc)
	b.Run("z", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			halfPanelSumsAVX512(&out[512], oc, &a0[0], &a1[0], R)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16*R), "ns/value")
	})
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j := 0; j < 16; j++ {
				or := out[j*oc+512 : j*oc+512+R]
				for k := range or {
					or[k] = a0[k*16+j] + a1[k*16+j]
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16*R), "ns/value")
	})
}
