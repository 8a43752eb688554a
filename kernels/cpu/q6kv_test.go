package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestQ6KTxKV checks k4v's ×16 tile on Q6_K (dotQ6KTx16KVS, checkQ6KV)
// against dotQ6Kx8AVX2 bit for bit: 1 to 16 weight rows per call (odd
// counts included), 16 to 19 activation rows (two groups in ktStrides'
// contiguous layout; 20–23 are padded to 24), 1 to 15 super-blocks, random and saturated blocks
// (every value 63, scales 127, −128 or −1, activations −127 or ±1: each
// sub-block's dword at its extreme), and that nothing is written past
// the output rows or the accumulators; from 16 super-blocks in
// ktStrides' interleaved layout and in q6KVS's slices (ffn_down's 8192
// values, ragged last slices).
func TestQ6KTxKV(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
	}
	for _, c := range []struct {
		n, rows, kb int
		sat         string
	}{
		{16, 1, 1, ""}, {16, 3, 2, ""}, {16, 16, 8, ""}, {16, 7, 15, ""}, {17, 7, 13, ""}, {18, 5, 3, ""},
		{19, 16, 8, ""}, {17, 9, 1, ""}, {19, 2, 11, ""}, {18, 13, 15, ""}, {16, 15, 8, ""}, {16, 11, 8, ""},
		{16, 4, 4, "max"}, {16, 16, 8, "min"}, {16, 3, 5, "ones"}, {19, 11, 15, "max"}, {17, 1, 2, "min"}, {18, 16, 2, "ones"},
		// 4096 values and more: ktStrides' interleaved layout, slices of
		// q6kvSlice super-blocks (ffn_down's 8192, ragged last slices)
		{16, 16, 32, ""}, {17, 5, 16, ""}, {19, 3, 17, ""}, {18, 1, 23, ""}, {16, 16, 32, "max"}, {16, 7, 20, "min"}, {19, 2, 33, "ones"},
	} {
		t.Run(fmt.Sprintf("n%d/r%d/k%d/sat=%s", c.n, c.rows, c.kb*256, c.sat), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n*c.rows), uint64(c.kb+13)))
			in := c.kb * 256
			data, _ := q6Case(r, c.kb, c.rows, c.sat)
			x := randF(r, c.n*in)
			if c.sat != "" {
				for i := range x {
					x[i] = float32(1 - 2*(i%2))
					if c.sat != "ones" {
						x[i] = -127
					}
				}
			}
			checkQ6KV(t, data, x, c.n, c.rows, in)
		})
	}
}

// checkQ6KV checks q6KVS (dotQ6KTx16KVS) on the first 16 rows against
// dotQ6Kx8AVX2 bit for bit on a Q6_K weight of rows×in (data) and n
// activation rows x, in ktStrides' layout for them: q6KVS's own slices
// and dotQ6KTx16KVS called directly in slices of 1, 2 and 5 super-blocks;
// and that nothing is written past the output rows or the accumulators.
func checkQ6KV(t *testing.T, data []byte, x []float32, n, rows, in int) {
	t.Helper()
	k := kern{avx2: true, vnni: true, k4v: true}
	var a actQ
	a.quantize(k, x, in, n, in, 256)
	a.derive(k, kernels.Q6_K, rows)
	if in >= ktnMinK {
		// derive leaves these rows to dotQ6KTxNVNNI (q6kvFits)
		a.transposeKV()
		a.sums6()
	}
	nb, rb, bss := in/256, kernels.Q6_K.RowBytes(in), in/16
	b6 := a.b68(0, nb)
	if len(a.kv) == 0 || len(a.kv) != len(a.kt) || b6 == nil {
		t.Fatalf("no actQ.kv or b6 for %d rows of %d values (kv %d, kt %d, b6 %d)", n, in, len(a.kv), len(a.kt), len(a.b6))
	}
	const n8 = 16
	gs, ss := a.ktStrides()
	if contiguous := gs == 2048*nb; contiguous != (in < ktnMinK) {
		t.Fatalf("%d rows of %d values: contiguous layout %v", n, in, contiguous)
	}
	const pad = 64
	sentinel := float32(math.Inf(-1))
	for _, slice := range []int{0, 1, 2, 5} {
		name := fmt.Sprintf("slices of %d", slice)
		got := make([]float32, n8*rows+pad)
		acc := make([]float32, 32*rows+pad)
		for i := range acc {
			acc[i] = sentinel
		}
		for i := n8 * rows; i < len(got); i++ {
			got[i] = sentinel
		}
		if slice == 0 {
			name = "q6KVS"
			q6KVS(data, rb, rows, a.kv, a.d8, b6, nb, got, rows, acc, gs, ss)
		} else {
			for s := 0; s < nb; s += slice {
				n, mode := min(slice, nb-s), 0
				if s > 0 {
					mode |= 1
				}
				if s+n == nb {
					mode |= 2
				}
				dotQ6KTx16KVS(&data[s*210], rb, rows, &a.kv[s*ss], &a.d8[s*16], &b6[s*256], nb, &got[0], rows, &acc[0], gs, ss, n, mode)
			}
		}
		for i := n8 * rows; i < len(got); i++ {
			if got[i] != sentinel {
				t.Fatalf("%s: wrote past its output at %d", name, i)
			}
		}
		for i := 32 * rows; i < len(acc); i++ {
			if acc[i] != sentinel {
				t.Fatalf("%s: wrote past its accumulators at %d", name, i)
			}
		}
		for m := 0; m < n8; m += 8 {
			for o := 0; o < rows; o++ {
				var want [8]float32
				dotQ6Kx8AVX2(&data[o*rb], &a.q[m*in], in, &a.d8[(m/8)*nb*16], &a.bs[m*bss], bss, nb, &want)
				for j := range want {
					if g := got[(m+j)*rows+o]; math.Float32bits(g) != math.Float32bits(want[j]) {
						t.Fatalf("%s: weight row %d, activation row %d: %v, dotQ6Kx8AVX2 %v", name, o, m+j, g, want[j])
					}
				}
			}
		}
	}
}

// TestQ6KVSums6 checks actQ.b6 against the rows' 16-value sums word for
// word (and that rows past the last group of 8 are left out).
func TestQ6KVSums6(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
	}
	for _, c := range []struct{ n, kb int }{{8, 1}, {9, 3}, {16, 8}, {23, 2}, {136, 3}} {
		r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.kb)))
		in := 256 * c.kb
		var a actQ
		a.quantize(kern{avx2: true}, randF(r, c.n*in), in, c.n, in, 256)
		a.sums6()
		nb := c.kb
		if len(a.b6) != c.n/8*8*nb*32 {
			t.Fatalf("%d rows × %d: %d words, want %d", c.n, in, len(a.b6), c.n/8*8*nb*32)
		}
		for m := 0; m < c.n&^7; m++ {
			for b := 0; b < nb; b++ {
				for pos := 0; pos < 32; pos++ {
					want := a.bs[m*in/16+16*b+pos%16]
					if g := a.b68(m&^7, nb)[(b*8+m%8)*32+pos]; g != want {
						t.Fatalf("row %d, super-block %d, word %d: %d, want %d", m, b, pos, g, want)
					}
				}
			}
		}
	}
}

// FuzzQ6KTxKV checks k4v's tiles on Q6_K (checkQ6KV) on weight blocks
// made from the fuzzer's bytes (values, scales and d included), 16 to 19
// activation rows, 1 to 16 weight rows and 1 to 34 super-blocks (both
// layouts).
func FuzzQ6KTxKV(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(15), uint8(15), []byte{0xff, 0x7f, 0, 0x80})
	f.Add(uint8(121), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasK4V {
			t.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
		}
		n, rows, in := int(n8%4)+16, int(rows8%16)+1, (int(kb8%34)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q6_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q6_K, data)
		checkQ6KV(t, data, randF(r, n*in), n, rows, in)
	})
}

// TestQ6KVAllocs checks that Q6_K MatMuls on k4v's ×16 tile allocate
// nothing once the activations' buffers have grown: 16 and 18 rows of
// 2048 values and 16 of 8192 (the ×16 tile, whole and in slices), 8 and
// 24 of 2048 (the VNNI tile), 1 and 2 threads.
func TestQ6KVAllocs(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
	}
	checkMatMulAllocs(t, kernels.Q6_K, rand.New(rand.NewPCG(5, 11)), 41, []struct{ n, in int }{{16, 2048}, {18, 2048}, {8, 2048}, {24, 2048}, {16, 8192}})
}

// BenchmarkQ6KV compares the Q6_K transposed tile on VNNI
// (dotQ6KTxNVNNI, "vnni") with k4v's ×16 tile on actQ.kv ("kv": q6KVS)
// through rowsQ6TN, alternated within each iteration, on one thread, where
// the kv tiles run (8 to 31 rows of under 4096 values): weights in L2
// (64×2048) and from memory (a 1B file's 8192×2048 attn_v-sized rows and
// a 32000×2048 output projection), 8, 16 and 24 activation rows. Metrics:
// multiply-adds and weight bytes per CPU-second of each.
func BenchmarkQ6KV(b *testing.B) {
	if !hasK4V {
		b.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 37))
	for _, sh := range []struct{ out, in int }{{64, 2048}, {8192, 2048}, {32000, 2048}, {2048, 8192}, {8192, 3072}} {
		data := randBlocks(r, kernels.Q6_K, sh.out, sh.in)
		w, err := kernels.NewHostWeight(kernels.Q6_K, sh.out, sh.in, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{8, 16, 24, 128} {
			x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
			t := &qmatTask{k: kern{avx2: true, vnni: true, k4v: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
			t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
			t.act.derive(t.k, kernels.Q6_K, sh.out)
			span := max(8, qTileL2/sh.in&^7)
			var acc [ktnRows * ktnGroups * 16]float32
			run := func(kv bool) {
				t.k.k4v = kv
				for m0 := 0; m0 < n; m0 += span {
					for ob := 0; ob < sh.out; ob += ktnRows {
						t.rowsQ6TN(ob, min(ob+ktnRows, sh.out), m0, min(m0+span, n), &acc)
					}
				}
			}
			b.Run(fmt.Sprintf("%dx%d/n%d", sh.out, sh.in, n), func(b *testing.B) {
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for j := range cpu {
						v := (i + j) % 2
						c0 := processCPU()
						run(v == 1)
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"vnni", "kv"} {
					b.ReportMetric(float64(n*sh.out*sh.in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			})
		}
	}
}
