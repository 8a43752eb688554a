package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestQ6TileTN checks the Q6_K tile on transposed super-blocks
// (dotQ6KTxNAVX2) against the ×8 tile that decodes per call
// (dotQ6Kx8AVX2) bit for bit, and against plain Go (dotQ6KGo) within the
// terms' float32 bound: called directly on blocks of 1 to 16 weight rows
// and runs of 1 to 17 groups of 8 rows (from every group for runs of 1
// and 2, from the first two otherwise), in both of transposeK's layouts,
// and through MatMul on 1 and 2 threads at 8 to 137 rows (×4 and
// one-row leftovers), reductions of 1 to 64 super-blocks (L2 spans of 16
// to 128 rows), weight-row counts that are not multiples of the blocks.
// Saturated blocks (every value 63, scales 127, −128 or −1, activations
// ±1 or −127) check the word sums at their extremes. The direct calls'
// outputs have padding columns, and their accumulators and MatMul's output
// are followed by sentinels, that must stay untouched.
func TestQ6TileTN(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		sat                 string // "" random; else q6Case's saturated scale byte
	}{
		{16, 1, 1, 1, ""}, {16, 17, 8, 2, ""}, {17, 9, 2, 2, ""}, {24, 33, 3, 1, ""}, {31, 5, 16, 2, ""},
		{32, 30, 8, 2, ""}, {40, 5, 32, 1, ""}, {41, 37, 2, 2, ""}, {64, 16, 1, 1, ""}, {72, 130, 8, 2, ""},
		{96, 3, 64, 2, ""}, {128, 67, 3, 2, ""}, {137, 19, 2, 2, ""},
		{16, 4, 2, 1, "max"}, {32, 5, 8, 2, "min"}, {136, 6, 16, 2, "ones"}, {128, 18, 2, 1, "max"},
		// 8–15 rows: the ×8 tile on AVX2, the transposed one on VNNI
		// (q6tnMinRowsVNNI)
		{8, 1, 1, 1, ""}, {8, 37, 8, 2, ""}, {9, 16, 2, 2, ""}, {12, 97, 3, 2, ""}, {15, 33, 32, 1, ""},
		{8, 5, 2, 1, "max"}, {15, 6, 4, 2, "min"}, {11, 3, 2, 1, "ones"},
		// 16–19 rows of 3072 values: k4v's ×16 tile in slices (q6KVS) on
		// VBMI; 4096 and more: dotQ6KTxNVNNI (q6kvFits)
		{16, 97, 32, 2, ""}, {19, 33, 32, 1, ""}, {18, 17, 12, 2, ""}, {17, 21, 33, 2, ""},
		{16, 40, 17, 1, "max"}, {17, 9, 32, 2, "min"}, {16, 5, 33, 2, "ones"},
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%s", c.n, c.out, c.kb*256, c.threads, c.sat), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.kb+11)))
			data, _ := q6Case(r, c.kb, c.out, c.sat)
			in := c.kb * 256
			x := randF(r, c.n*in)
			if c.sat != "" {
				for i := range x {
					x[i] = float32(1 - 2*(i%2))
					if c.sat != "ones" {
						x[i] = -127
					}
				}
			}
			checkQ6TN(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// checkQ6TN checks dotQ6KTxNAVX2 against dotQ6Kx8AVX2 bit for bit and
// against dotQ6KGo within magTol on a Q6_K weight of out×in (data) and n
// activation rows x: directly, and through MatMul on threads threads.
func checkQ6TN(t *testing.T, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(kernels.Q6_K, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	var a actQ
	a.quantize(kern{avx2: true}, x, in, n, in, 256)
	if len(a.kt) == 0 {
		t.Fatalf("no transposed activations at %d rows of %d values", n, in)
	}
	nb, rb, bss := in/256, kernels.Q6_K.RowBytes(in), in/16
	n8, groups := n&^7, n/8
	ref := make([]float32, n8*out)
	var want [8]float32
	for m := 0; m < n8; m += 8 {
		for o := 0; o < out; o++ {
			dotQ6Kx8AVX2(&data[o*rb], &a.q[m*in], in, &a.d8[(m/8)*nb*16], &a.bs[m*bss], bss, nb, &want)
			for r := range want {
				ref[(m+r)*out+o] = want[r]
				g := dotQ6KGo(data[o*rb:(o+1)*rb], a.q[(m+r)*in:(m+r+1)*in], a.d[(m+r)*nb:(m+r+1)*nb], a.bs[(m+r)*bss:(m+r+1)*bss])
				tol := magTol(kernels.Q6_K, data[o*rb:(o+1)*rb], a.q[(m+r)*in:(m+r+1)*in], a.d[(m+r)*nb:(m+r+1)*nb])
				if d := math.Abs(float64(want[r] - g)); !(d <= tol) {
					t.Fatalf("weight row %d, activation row %d: dotQ6Kx8AVX2 %v, plain Go %v (tolerance %g)", o, m+r, want[r], g, tol)
				}
			}
		}
	}

	// direct calls: blocks of weight rows × runs of groups
	gs, ss := a.ktStrides()
	const padCols = 3
	os := out + padCols
	sentinel := float32(math.Inf(-1))
	res := make([]float32, n8*os)
	for _, v := range q6TNVariants() {
		for _, rows := range []int{1, 2, 3, 5, 16} {
			rows = min(rows, out)
			for g0 := 0; g0 < groups; g0++ {
				for gn := 1; g0+gn <= groups; gn++ {
					if gn > 2 && g0 > 1 {
						break
					}
					for i := range res {
						res[i] = sentinel
					}
					acc := make([]float32, rows*gn*16+16)
					for i := rows * gn * 16; i < len(acc); i++ {
						acc[i] = sentinel
					}
					o0 := out - rows
					m := 8 * g0
					q6TxN(v.vnni, data[o0*rb:], rb, rows, &a.kt[g0*gs], &a.d8[g0*nb*16], &a.bs[m*bss], 2*bss, nb,
						res[m*os+o0:], os, gn, &acc[0], gs, ss)
					for i := rows * gn * 16; i < len(acc); i++ {
						if acc[i] != sentinel {
							t.Fatalf("%s: %d rows × %d groups from %d: accumulator %d past the end written", v.name, rows, gn, g0, i)
						}
					}
					for r := 0; r < n8; r++ {
						for c := 0; c < os; c++ {
							got := res[r*os+c]
							inside := r >= m && r < m+8*gn && c >= o0 && c < o0+rows
							if !inside {
								if got != sentinel {
									t.Fatalf("%s: %d rows × %d groups from %d: [%d,%d] written outside the block", v.name, rows, gn, g0, r, c)
								}
								continue
							}
							if want := ref[r*out+c]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%s: %d rows × %d groups from %d: [%d,%d] %v, dotQ6Kx8AVX2 %v", v.name, rows, gn, g0, r, c, got, want)
							}
						}
					}
				}
			}
		}
	}

	for _, v := range q6TNVariants() {
		b := New(Options{Threads: threads, QuantizeActivations: true})
		b.k.vnni, b.k.k4v = v.vnni, v.k4v
		const pad = 64
		mm := &kernels.Host{R: n, C: out, F: make([]float32, n*out+pad)}
		for i := n * out; i < len(mm.F); i++ {
			mm.F[i] = sentinel
		}
		b.MatMul(mm, &kernels.Host{R: n, C: in, F: x}, w, n)
		b.Close()
		for i, want := range ref {
			if g := mm.F[i]; math.Float32bits(g) != math.Float32bits(want) {
				t.Fatalf("%s: MatMul [%d,%d]: %v, dotQ6Kx8AVX2 %v", v.name, i/out, i%out, g, want)
			}
		}
		for i := n * out; i < len(mm.F); i++ {
			if mm.F[i] != sentinel {
				t.Fatalf("%s: MatMul wrote past its output at %d", v.name, i)
			}
		}
	}
}

// FuzzQ6TileTN checks dotQ6KTxNAVX2 (and MatMul) against dotQ6Kx8AVX2 bit
// for bit on weight blocks made from the fuzzer's bytes (values, scales
// and d included), batches of 8 to 137 rows and reductions of 1 to 20
// super-blocks.
func FuzzQ6TileTN(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(7), uint8(15), []byte{0xff, 0x7f, 0, 0x80})
	f.Add(uint8(121), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, in := int(n8%130)+8, int(rows8%19)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q6_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q6_K, data)
		checkQ6TN(t, data, randF(r, n*in), n, rows, in, 2)
	})
}

// TestQ6TileTNAllocs checks that Q6_K MatMuls on the transposed tile (its
// accumulators on the stack) allocate nothing once the activations'
// buffers have grown: 16 rows of 8192 values and 48 of 2048, on 1 and 2
// threads.
func TestQ6TileTNAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(5, 7))
	const out = 40
	for _, c := range []struct{ n, in int }{{16, 8192}, {48, 2048}} {
		n, in := c.n, c.in
		w, err := kernels.NewHostWeight(kernels.Q6_K, out, in, randBlocks(r, kernels.Q6_K, out, in))
		if err != nil {
			t.Fatal(err)
		}
		x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
		res := &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
		for _, threads := range []int{1, 2} {
			b := New(Options{Threads: threads, QuantizeActivations: true})
			b.MatMul(res, x, w, n)
			if a := testing.AllocsPerRun(20, func() { b.MatMul(res, x, w, n) }); a != 0 {
				t.Errorf("%d rows, %d threads: %v allocations per MatMul, want 0", n, threads, a)
			}
			b.Close()
		}
	}
}

// BenchmarkTransposeK compares, on one thread, transposeK in plain Go
// (transposeKGo) and in AVX2 (transposeKAVX2 per row), alternated within
// each iteration, at 16 and 128 rows of 2048 and 8192 values. Metrics:
// activation bytes per CPU-nanosecond of each.
func BenchmarkTransposeK(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{2048, 8192} {
		for _, n := range []int{16, 128} {
			a := actQ{blk: 256, k: k, n: n, q: make([]int8, n*k)}
			for i := range a.q {
				a.q[i] = int8(r.IntN(256) - 128)
			}
			a.transposeK()
			gs, ss := a.ktStrides()
			vs := [2]func(){
				func() { a.transposeKGo(k/256, n/8, gs, ss) },
				func() { a.transposeK() },
			}
			b.Run(fmt.Sprintf("k%d/n%d", k, n), func(b *testing.B) {
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for v, f := range vs {
						c0 := processCPU()
						f()
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"go", "avx2"} {
					b.ReportMetric(float64(n*k)*float64(b.N)/cpu[v]/1e9, name+"-B/cpu-ns")
				}
			})
		}
	}
}

// BenchmarkQ6TileTN compares, on one thread in qTiles' pattern (groups of
// 8 rows in L2 spans meeting every block of weight rows), the Q6_K path
// before this tile (old: rows8 with dotQ6Kx8AVX2 below q6UMinRows rows,
// q6Blocks with the unpacked tile from there) and the tile on transposed
// super-blocks (new: rowsQ6TN), alternated within each iteration so both
// see the same load, at the Q6_K shapes of a Q4_K_M 1B file (the output
// projection 32000×2048 and ffn_down 2048×8192) and of a Q6_K file
// (2048×2048, 8192×2048), 16 to 128 rows. Metrics: multiply-adds per
// CPU-second of each.
func BenchmarkQ6TileTN(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 23))
	for _, sh := range []struct{ out, in int }{{32000, 2048}, {2048, 8192}, {2048, 2048}, {8192, 2048}} {
		data := randBlocks(r, kernels.Q6_K, sh.out, sh.in)
		w, err := kernels.NewHostWeight(kernels.Q6_K, sh.out, sh.in, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{16, 32, 64, 128} {
			x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
			t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
			t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
			rows := max(1, qTileL1/kernels.Q6_K.RowBytes(sh.in))
			if n < qTileMinRows {
				rows = min(rows, qTileFewRows)
			}
			span := max(8, qTileL2/sh.in&^7)
			var acc [ktnRows * ktnGroups * 16]float32
			vs := [2]func(){
				func() {
					if n >= q6UMinRows {
						t.q6Blocks(0, sh.out, n, span)
						return
					}
					for m0 := 0; m0 < n; m0 += span {
						for ob := 0; ob < sh.out; ob += rows {
							for m := m0; m < min(m0+span, n); m += 8 {
								t.rows8(ob, min(ob+rows, sh.out), m)
							}
						}
					}
				},
				func() {
					for m0 := 0; m0 < n; m0 += span {
						for ob := 0; ob < sh.out; ob += ktnRows {
							t.rowsQ6TN(ob, min(ob+ktnRows, sh.out), m0, min(m0+span, n), &acc)
						}
					}
				},
			}
			b.Run(fmt.Sprintf("%dx%d/n%d", sh.out, sh.in, n), func(b *testing.B) {
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for v, f := range vs {
						c0 := processCPU()
						f()
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"old", "new"} {
					b.ReportMetric(float64(n*sh.out*sh.in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
				}
			})
		}
	}
}
