package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// q5kSaturate sets every Q5_K block of data (d and dmin kept) to its
// extremes: all values 31 and every scale and min 63.
func q5kSaturate(data []byte) {
	for b := 0; b < len(data); b += kernels.Q5_K.RowBytes(256) {
		for i := b + 4; i < b+kernels.Q5_K.RowBytes(256); i++ {
			data[i] = 0xff
		}
	}
}

// TestQ5KTilesVNNI checks the Q5_K ×8 tile on VNNI (dotQ5Kx8VNNI) against
// dotQ5Kx8AVX2 bit for bit and against plain Go (dotQ5KGo) within the
// terms' float32 bound, on reductions of 1 to 33 super-blocks, random
// and saturated blocks (values 31, scales and mins 63, activations ±127),
// and through MatMul with the VNNI kernels on and off at 8 to 137 rows
// (×8 tiles below 16 rows, the transposed tile dotQ5KTxNVNNI from 16 with
// the odd weight row of a block on the ×8 tile, ×4 and single-row
// leftovers, several L2 spans and calls of ktnGroups groups) and with
// k4v's tiles on actQ.kv (dotQ5KTx8KV, dotQ5KTx16KV, dotQ5KTxNKV from 8
// rows) on 1 and 2 threads, bit for bit between the three.
func TestQ5KTilesVNNI(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX512_VNNI kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		sat                 bool
	}{
		{8, 3, 1, 1, false}, {8, 5, 2, 2, false}, {9, 7, 3, 1, false}, {16, 33, 8, 2, false}, {23, 4, 17, 2, false},
		{32, 9, 32, 1, false}, {64, 16, 8, 2, false}, {127, 5, 33, 2, false}, {137, 11, 2, 2, false},
		{8, 4, 4, 1, true}, {16, 6, 8, 2, true}, {40, 3, 32, 2, true},
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%v", c.n, c.out, c.kb*256, c.threads, c.sat), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.kb+5)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q5_K, c.out, in)
			x := randF(r, c.n*in)
			if c.sat {
				q5kSaturate(data)
				for i := range x {
					x[i] = float32(127 * (1 - 2*(i%2)))
				}
			}
			checkQ5V(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// checkQ5V checks dotQ5Kx8VNNI against dotQ5Kx8AVX2 bit for bit and
// against dotQ5KGo within magTol on a Q5_K weight of out×in (data) and n
// activation rows x, and MatMul on threads threads with the VNNI kernels
// on and off, bit for bit, nothing written past its output.
func checkQ5V(t *testing.T, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	var a actQ
	a.quantize(kern{avx2: true}, x, in, n, in, 256)
	nb, rb, bss := in/256, kernels.Q5_K.RowBytes(in), in/16
	for m := 0; m+8 <= n; m += 8 {
		for o := 0; o < out; o++ {
			var want, got [8]float32
			args := func(f func(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32), out *[8]float32) {
				f(&data[o*rb], &a.q[m*in], in, &a.d8[(m/8)*nb*16], &a.bs[m*bss], bss, nb, out)
			}
			args(dotQ5Kx8AVX2, &want)
			args(dotQ5Kx8VNNI, &got)
			for r := range want {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("weight row %d, activation row %d: VNNI %v, AVX2 %v", o, m+r, got[r], want[r])
				}
				g := dotQ5KGo(data[o*rb:(o+1)*rb], a.q[(m+r)*in:(m+r+1)*in], a.d[(m+r)*nb:(m+r+1)*nb], a.bs[(m+r)*bss:(m+r+1)*bss])
				tol := magTol(kernels.Q5_K, data[o*rb:(o+1)*rb], a.q[(m+r)*in:(m+r+1)*in], a.d[(m+r)*nb:(m+r+1)*nb])
				if d := math.Abs(float64(got[r] - g)); !(d <= tol) {
					t.Fatalf("weight row %d, activation row %d: VNNI %v, plain Go %v (tolerance %g)", o, m+r, got[r], g, tol)
				}
			}
		}
	}
	w, err := kernels.NewHostWeight(kernels.Q5_K, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	// the AVX2 ×8 tile, the VNNI tiles (dotQ5KTxNVNNI from 16 rows) and
	// k4v's on actQ.kv (dotQ5KTxNKV) where the machine has VBMI
	variants := []kern{{}, {vnni: true}, {vnni: true, k4v: hasK4V}}
	res := make([][]float32, len(variants))
	for v, kv := range variants {
		vnni := kv.vnni
		b := New(Options{Threads: threads, QuantizeActivations: true})
		b.k.vnni, b.k.k4v = kv.vnni, kv.k4v
		const pad = 64
		mm := &kernels.Host{R: n, C: out, F: make([]float32, n*out+pad)}
		for i := n * out; i < len(mm.F); i++ {
			mm.F[i] = float32(math.Inf(-1))
		}
		b.MatMul(mm, &kernels.Host{R: n, C: in, F: x}, w, n)
		b.Close()
		for i := n * out; i < len(mm.F); i++ {
			if !math.IsInf(float64(mm.F[i]), -1) {
				t.Fatalf("vnni=%v: MatMul wrote past its output at %d", vnni, i)
			}
		}
		res[v] = mm.F[:n*out]
	}
	for v := 1; v < len(res); v++ {
		for i := range res[0] {
			if math.Float32bits(res[0][i]) != math.Float32bits(res[v][i]) {
				t.Fatalf("MatMul [%d,%d]: %+v %v, AVX2 %v", i/out, i%out, variants[v], res[v][i], res[0][i])
			}
		}
	}
}

// TestQ5KTxNKV checks dotQ5KTxNKV, the Q5_K tile on actQ.kv, against
// dotQ5Kx8AVX2 bit for bit (and dotQ5KTx8KV, dotQ5KTx16KV at 8 and 16 rows against it): 1 to 16 weight rows per call (odd counts
// included), 1 to ktnGroups groups of 8 activation rows (both of
// ktStrides' layouts), 1 to 33 super-blocks, random and saturated blocks
// (values 31, scales and mins 63, activations ±127; every lane's 8 values
// then sum to 8·31·127, the words' bound), and that it writes nothing
// past its rows.
func TestQ5KTxNKV(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI kernels on this machine or build")
	}
	for _, c := range []struct {
		n, rows, kb int
		sat         bool
	}{
		{8, 1, 1, false}, {8, 3, 2, false}, {16, 16, 8, false}, {16, 7, 15, false}, {16, 1, 1, false}, {16, 7, 32, false}, {24, 5, 3, false},
		{64, 16, 8, false}, {64, 9, 1, false}, {96, 2, 17, false}, {136, 13, 33, false}, {128, 15, 8, false},
		{8, 4, 4, true}, {16, 16, 8, true}, {16, 3, 5, true}, {64, 11, 32, true}, {40, 1, 2, true},
	} {
		t.Run(fmt.Sprintf("n%d/r%d/k%d/sat=%v", c.n, c.rows, c.kb*256, c.sat), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n*c.rows), uint64(c.kb+11)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q5_K, c.rows, in)
			x := randF(r, c.n*in)
			if c.sat {
				q5kSaturate(data)
				for i := range x {
					x[i] = float32(127 * (1 - 2*(i%2)))
				}
			}
			var a actQ
			a.quantize(kern{avx2: true, vnni: true, k4v: true}, x, in, c.n, in, 256)
			a.derive(kern{avx2: true, vnni: true, k4v: true}, kernels.Q5_K, c.rows)
			if len(a.kv) == 0 || len(a.kv) != len(a.kt) {
				t.Fatalf("no actQ.kv for %d rows of %d values", c.n, in)
			}
			nb, rb, bss := in/256, kernels.Q5_K.RowBytes(in), in/16
			gs, ss := a.ktStrides()
			const pad = 64
			got := make([]float32, c.n*c.rows+pad)
			for i := c.n * c.rows; i < len(got); i++ {
				got[i] = float32(math.Inf(-1))
			}
			var acc [ktnRows * ktnGroups * 16]float32
			for m := 0; m < c.n; m += 8 * ktnGroups {
				g := min(ktnGroups, (c.n-m)/8)
				dotQ5KTxNKV(&data[0], rb, c.rows, &a.kv[(m/8)*gs], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &got[m*c.rows], c.rows, g, &acc[0], gs, ss)
			}
			if (c.n == 8 || c.n == 16) && gs == 2048*nb {
				// the ×8 or ×16 tile (accumulators in registers) on the
				// same rows: the same bits
				x16 := make([]float32, len(got))
				copy(x16[c.n*c.rows:], got[c.n*c.rows:])
				f := dotQ5KTx16KV
				if c.n == 8 {
					f = dotQ5KTx8KV
				}
				f(&data[0], rb, c.rows, &a.kv[0], &a.d8[0], &a.bp8(0, nb)[0], nb, &x16[0], c.rows)
				for i := range got {
					if math.Float32bits(x16[i]) != math.Float32bits(got[i]) {
						t.Fatalf("[%d,%d]: dotQ5KTx%dKV %v, dotQ5KTxNKV %v", i/c.rows, i%c.rows, c.n, x16[i], got[i])
					}
				}
			}
			for i := c.n * c.rows; i < len(got); i++ {
				if !math.IsInf(float64(got[i]), -1) {
					t.Fatalf("wrote past its output at %d", i)
				}
			}
			for m := 0; m < c.n; m += 8 {
				for o := 0; o < c.rows; o++ {
					var want [8]float32
					dotQ5Kx8AVX2(&data[o*rb], &a.q[m*in], in, &a.d8[(m/8)*nb*16], &a.bs[m*bss], bss, nb, &want)
					for j := range want {
						if g := got[(m+j)*c.rows+o]; math.Float32bits(g) != math.Float32bits(want[j]) {
							t.Fatalf("weight row %d, activation row %d: %v, dotQ5Kx8AVX2 %v", o, m+j, g, want[j])
						}
					}
				}
			}
		})
	}
}

// FuzzQ5KTilesVNNI checks the Q5_K VNNI tiles (checkQ5V) on weight blocks
// made from the fuzzer's bytes (values, scales, mins, d and dmin
// included), batches of 8 to 137 rows and reductions of 1 to 20
// super-blocks.
func FuzzQ5KTilesVNNI(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(7), uint8(15), []byte{0xff, 0x7f, 0, 0x80})
	f.Add(uint8(121), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasVNNI {
			t.Skip("no AVX512_VNNI kernels on this machine or build")
		}
		n, rows, in := int(n8%130)+8, int(rows8%19)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q5_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q5_K, data)
		checkQ5V(t, data, randF(r, n*in), n, rows, in, 2)
	})
}

// TestQ5KTilesVNNIAllocs checks that Q5_K MatMuls on the VNNI tiles
// allocate nothing once the activations' buffers have grown: 16 rows of
// 8192 values and 48 of 2048 (transposed tiles), 16 of 2048 (the ×16
// tile on actQ.kv), 8 of 2048 (×8 tiles), on 1 and 2 threads.
func TestQ5KTilesVNNIAllocs(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX512_VNNI kernels on this machine or build")
	}
	checkMatMulAllocs(t, kernels.Q5_K, rand.New(rand.NewPCG(5, 9)), 41, []struct{ n, in int }{{16, 8192}, {16, 2048}, {48, 2048}, {8, 2048}})
}

// BenchmarkQ5KTilesVNNI compares Q5_K batched products through qTiles
// with the AVX2 kernels ("avx2": the ×8 tile), the VNNI ones ("vnni":
// dotQ5Kx8VNNI at 8 rows, dotQ5KTxNVNNI from 16) and k4v's tile on
// actQ.kv ("kv": dotQ5KTxNKV from 16 rows), alternated within each
// iteration, on one thread: weights in L2 (64×2048, 88 KiB) and from
// memory (a Q5_K_M 1B file's 2048×8192 and 8192×2048), 8, 16 and 128
// activation rows.
// Metrics: multiply-adds and weight bytes per CPU-second of each.
func BenchmarkQ5KTilesVNNI(b *testing.B) {
	if !hasVNNI {
		b.Skip("no AVX512_VNNI kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(19, 31))
	for _, sh := range []struct{ out, in int }{{64, 2048}, {2048, 8192}, {8192, 2048}} {
		data := randBlocks(r, kernels.Q5_K, sh.out, sh.in)
		w, err := kernels.NewHostWeight(kernels.Q5_K, sh.out, sh.in, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{8, 16, 128} {
			x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
			t := &qmatTask{k: kern{avx2: true, vnni: true, k4v: hasK4V}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
			t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
			b.Run(fmt.Sprintf("%dx%d/n%d", sh.out, sh.in, n), func(b *testing.B) {
				var cpu [3]float64
				for i := 0; i < b.N; i++ {
					for j := range cpu {
						v := (i + j) % len(cpu)
						t.k.vnni, t.k.k4v = v >= 1, v == 2 && hasK4V
						c0 := processCPU()
						t.qTiles(0, sh.out)
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"avx2", "vnni", "kv"} {
					b.ReportMetric(float64(n*sh.out*sh.in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			})
		}
	}
}
