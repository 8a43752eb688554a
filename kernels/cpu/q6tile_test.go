package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestQ6Tile checks that the Q6_K ×8 tile on unpacked rows (dotQ6Kx8RAVX2
// on rows unpacked by q6kUnpackAVX2) equals the tile that decodes per call
// (dotQ6Kx8AVX2) bit for bit: called directly on every weight row and
// group of 8 rows, and through MatMul (q6Blocks and rows8Q6 from
// q6UMinRows rows, rows8 below) on 1 and 2 threads, batches 8–136 (groups
// of 8 with ×4 and one-row leftovers),
// reductions of 1–3, 8, 16, 32, 40 and 64 super-blocks (spans of 1–8),
// weight-row counts that are not multiples of any block.
// Saturated blocks (every value 63, every scale 127, −128 or −1, against
// activations of ±1 or −127) check the sums at their extremes. MatMul's
// output and q6kUnpackAVX2's buffers are followed by sentinels that must
// stay untouched.
func TestQ6Tile(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		sat                 string // "" random; else q6Case's saturated scale byte
	}{
		{8, 1, 1, 1, ""}, {8, 7, 2, 1, ""}, {9, 5, 3, 2, ""}, {16, 6, 8, 2, ""}, {17, 9, 2, 2, ""},
		{23, 33, 1, 2, ""}, {32, 30, 8, 2, ""}, {40, 5, 32, 1, ""}, {71, 130, 8, 2, ""}, {128, 67, 3, 2, ""},
		{8, 4, 2, 1, "max"}, {16, 5, 8, 2, "min"}, {33, 6, 16, 2, "ones"},
		{8, 2, 40, 1, ""},
		{29, 5, 64, 2, ""},  // 16 rows per L2 span (qTileL2)
		{136, 19, 2, 2, ""}, // 17 groups of 8: two passes over buf's accumulators
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%s", c.n, c.out, c.kb*256, c.threads, c.sat), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.kb+7)))
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
			checkQ6Tile(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// checkQ6Tile checks dotQ6Kx8RAVX2 against dotQ6Kx8AVX2 bit for bit (and
// q6kUnpackAVX2 and dotQ6Kx8RAVX2 for writes past their rows) on a Q6_K
// weight of out×in (data) and n activation rows x: directly, over the
// whole reduction and in spans of 1 and 3 super-blocks, and through
// MatMul on threads threads.
func checkQ6Tile(t *testing.T, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(kernels.Q6_K, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	var a actQ
	a.quantize(kern{avx2: true}, x, in, n, in, 256)
	nb, rb := in/256, kernels.Q6_K.RowBytes(in)
	n8 := n &^ 7
	ref := make([]float32, n8*out)
	var want [8]float32
	const pad = 64
	u := make([]byte, out*nb*q6UnpackBytes+pad)
	ud := make([]float32, out*nb+pad)
	for i := out * nb * q6UnpackBytes; i < len(u); i++ {
		u[i] = 0xa5
	}
	for i := out * nb; i < len(ud); i++ {
		ud[i] = -1
	}
	q6kUnpackAVX2(&data[0], rb, out, nb, &u[0], &ud[0], rb)
	for i := out * nb * q6UnpackBytes; i < len(u); i++ {
		if u[i] != 0xa5 {
			t.Fatalf("q6kUnpackAVX2 wrote past %d rows × %d super-blocks", out, nb)
		}
	}
	for i := out * nb; i < len(ud); i++ {
		if ud[i] != -1 {
			t.Fatalf("q6kUnpackAVX2 wrote a d past %d rows × %d super-blocks", out, nb)
		}
	}
	for m := 0; m < n8; m += 8 {
		xd8 := a.d8[(m/8)*nb*16:]
		for o := 0; o < out; o++ {
			dotQ6Kx8AVX2(&data[o*rb], &a.q[m*in], in, &xd8[0], &a.bs[m*in/16], in/16, nb, &want)
			for r := range want {
				ref[(m+r)*out+o] = want[r]
			}
		}
		// the reduction whole, in spans of 1 and 3 super-blocks, carrying
		// the accumulators (16 per weight row, then a sentinel's worth)
		for _, ks := range []int{nb, 1, 3} {
			st := make([]float32, out*16+pad)
			for i := out * 16; i < len(st); i++ {
				st[i] = -1
			}
			for b0 := 0; b0 < nb; b0 += ks {
				kn := min(ks, nb-b0)
				q6kUnpackAVX2(&data[b0*210], rb, out, kn, &u[0], &ud[0], kn*210)
				dotQ6Kx8RAVX2(&u[0], &ud[0], &a.q[m*in+b0*256], in, &xd8[b0*16], &a.bs[m*in/16+b0*16], in/16, kn, out, &st[0])
			}
			for i := out * 16; i < len(st); i++ {
				if st[i] != -1 {
					t.Fatalf("dotQ6Kx8RAVX2 wrote past %d rows' accumulators", out)
				}
			}
			for o := 0; o < out; o++ {
				v := st[16*o:]
				got := [8]float32{v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7], v[8] + v[12], v[9] + v[13], v[10] + v[14], v[11] + v[15]}
				for r := range got {
					if w := ref[(m+r)*out+o]; math.Float32bits(got[r]) != math.Float32bits(w) {
						t.Fatalf("spans of %d: weight row %d, activation row %d: %v, dotQ6Kx8AVX2 %v", ks, o, m+r, got[r], w)
					}
				}
			}
		}
	}

	b := New(Options{Threads: threads, QuantizeActivations: true})
	defer b.Close()
	res := &kernels.Host{R: n, C: out, F: make([]float32, n*out+pad)}
	sentinel := float32(math.Inf(-1))
	for i := n * out; i < len(res.F); i++ {
		res.F[i] = sentinel
	}
	b.MatMul(res, &kernels.Host{R: n, C: in, F: x}, w, n)
	for i, v := range ref {
		if g := res.F[i]; math.Float32bits(g) != math.Float32bits(v) {
			t.Fatalf("MatMul [%d,%d]: %v, dotQ6Kx8AVX2 %v", i/out, i%out, g, v)
		}
	}
	for i := n * out; i < len(res.F); i++ {
		if res.F[i] != sentinel {
			t.Fatalf("MatMul wrote past its output at %d", i)
		}
	}
}

// FuzzQ6Tile checks dotQ6Kx8RAVX2 (and MatMul) against dotQ6Kx8AVX2 bit
// for bit on weight blocks made from the fuzzer's bytes (values, scales
// and d included), batches of 8 to 71 rows and reductions of 1 to 20
// super-blocks.
func FuzzQ6Tile(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(7), uint8(15), []byte{0xff, 0x7f, 0, 0x80})
	f.Add(uint8(63), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, in := int(n8%64)+8, int(rows8%9)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q6_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q6_K, data)
		checkQ6Tile(t, data, randF(r, n*in), n, rows, in, 2)
	})
}

// BenchmarkQ6Tile compares, on one thread in qTiles' pattern (groups of
// 8 rows in L2 spans, each meeting every block of weight rows), the tile
// that decodes per call (old: rows8 with dotQ6Kx8AVX2) and the tile on
// unpacked rows (new: rows8Q6), alternated within each iteration so both
// see the same load, at 16 and 128 rows and reductions of 2048 and 8192
// values. Metrics: multiply-adds per CPU-second of each.
func BenchmarkQ6Tile(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 21))
	for _, sh := range []struct{ out, in int }{{2048, 2048}, {512, 8192}} {
		for _, n := range []int{16, 128} {
			data := randBlocks(r, kernels.Q6_K, sh.out, sh.in)
			w, err := kernels.NewHostWeight(kernels.Q6_K, sh.out, sh.in, data)
			if err != nil {
				b.Fatal(err)
			}
			x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
			t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
			t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
			rows := max(1, qTileL1/kernels.Q6_K.RowBytes(sh.in))
			if n < qTileMinRows {
				rows = min(rows, qTileFewRows)
			}
			span := max(8, qTileL2/sh.in&^7)
			vs := [2]func(){
				func() {
					for m0 := 0; m0 < n; m0 += span {
						for ob := 0; ob < sh.out; ob += rows {
							for m := m0; m < min(m0+span, n); m += 8 {
								t.rows8(ob, min(ob+rows, sh.out), m)
							}
						}
					}
				},
				func() { t.q6Blocks(0, sh.out, n, span) },
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

// TestQ6TileAllocs checks that a Q6_K MatMul on the unpacked tile (its
// scratch on the stack) allocates nothing once the activations' buffers
// have grown: 48 rows of 2048 values, on 1 and 2 threads.
func TestQ6TileAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const n, out, in = 48, 40, 2048
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
			t.Errorf("%d threads: %v allocations per MatMul, want 0", threads, a)
		}
		b.Close()
	}
}
