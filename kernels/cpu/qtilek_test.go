package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestTile8P checks that the Q4_K ×8 tiles on precomputed 32-value sums
// (dotQ4Kx8PAVX2, and dotQ4Kx8SAVX2 on scales unpacked by q4kScalesAVX2)
// equal the ×8 tile that forms them itself (dotQ4Kx8AVX2) bit for bit:
// called directly on every weight row and group of 8 rows, and through
// MatMul (rows8K from qTileMinRows rows, rows8 below that or where a row's
// scales do not fit its buffer) (1 and 2 threads; batches 8–71, so groups
// of 8 with ×4 and one-row leftovers; reductions of 1–3 and 8–32
// super-blocks; weight-row counts that are not multiples of any block;
// above qTileMinRows and below). Saturated blocks (every nibble, scale and
// min 63/15, activations ±1) check the sums at their extremes. MatMul's
// output is followed by sentinels that must stay untouched.
func TestTile8P(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		saturated           bool
	}{
		{8, 1, 1, 1, false}, {8, 7, 2, 1, false}, {9, 5, 3, 2, false}, {16, 6, 8, 2, false}, {17, 9, 2, 2, false},
		{23, 33, 1, 2, false}, {32, 30, 8, 2, false}, {40, 5, 32, 1, false}, {71, 130, 8, 2, false}, {128, 67, 3, 2, false},
		{8, 4, 2, 1, true}, {16, 5, 8, 2, true}, {33, 6, 16, 2, true},
		{8, 2, 120, 1, false}, // one row's scales beyond rows8K's buffer: rows8
		{29, 5, 64, 2, false}, // 16 rows per L2 span (qTileL2): 2 spans and a ×4 group
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%v", c.n, c.out, c.kb*256, c.threads, c.saturated), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.kb+7)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q4_K, c.out, in)
			x := randF(r, c.n*in)
			if c.saturated {
				for i := range data {
					data[i] = 0xff
				}
				for o := 0; o < len(data); o += 144 {
					data[o+1], data[o+3] = 0x3c, 0x3c // finite d and dmin
				}
				for i := range x {
					x[i] = float32(1 - 2*(i%2))
				}
			}
			check8P(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// check8P checks dotQ4Kx8PAVX2 and dotQ4Kx8SAVX2 against dotQ4Kx8AVX2 bit
// for bit (and q4kScalesAVX2 for writes past its rows) on a Q4_K
// weight of out×in (data) and n activation rows x, directly and through
// MatMul on threads threads.
func check8P(t *testing.T, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(kernels.Q4_K, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	var a actQ
	a.quantize(kern{avx2: true}, x, in, n, in, 256)
	nb, rb := in/256, kernels.Q4_K.RowBytes(in)
	n8 := n &^ 7
	if len(a.bp) != n8/8*nb*64 {
		t.Fatalf("pairs8 made %d sums, want %d", len(a.bp), n8/8*nb*64)
	}
	ref := make([]float32, n8*out)
	var want, got, gotS [8]float32
	sc := make([]byte, out*nb*64+64)
	for i := out * nb * 64; i < len(sc); i++ {
		sc[i] = 0xa5
	}
	q4kScalesAVX2(&data[0], rb, out, nb, &sc[0])
	for i := out * nb * 64; i < len(sc); i++ {
		if sc[i] != 0xa5 {
			t.Fatalf("q4kScalesAVX2 wrote past %d rows × %d super-blocks", out, nb)
		}
	}
	for m := 0; m < n8; m += 8 {
		xd8 := a.d8[(m/8)*nb*16:]
		for o := 0; o < out; o++ {
			dotQ4Kx8AVX2(&data[o*rb], &a.q[m*in], in, &xd8[0], &a.bs[m*in/16], in/16, nb, &want)
			dotQ4Kx8PAVX2(&data[o*rb], &a.q[m*in], in, &xd8[0], &a.bp8(m, nb)[0], nb, &got)
			dotQ4Kx8SAVX2(&data[o*rb], &a.q[m*in], in, &xd8[0], &a.bp8(m, nb)[0], &sc[o*nb*64], nb, &gotS)
			for r := range got {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("weight row %d, activation row %d: %v, dotQ4Kx8AVX2 %v", o, m+r, got[r], want[r])
				}
				if math.Float32bits(gotS[r]) != math.Float32bits(want[r]) {
					t.Fatalf("S: weight row %d, activation row %d: %v, dotQ4Kx8AVX2 %v", o, m+r, gotS[r], want[r])
				}
				ref[(m+r)*out+o] = want[r]
			}
		}
	}

	b := New(Options{Threads: threads, QuantizeActivations: true})
	defer b.Close()
	const pad = 19
	res := &kernels.Host{R: n, C: out, F: make([]float32, n*out+pad)}
	sentinel := float32(math.Inf(-1))
	for i := n * out; i < len(res.F); i++ {
		res.F[i] = sentinel
	}
	b.MatMul(res, &kernels.Host{R: n, C: in, F: x}, w, n)
	for i, v := range ref {
		if g := res.F[i]; math.Float32bits(g) != math.Float32bits(v) {
			t.Fatalf("MatMul [%d,%d]: %v, dotQ4Kx8AVX2 %v", i/out, i%out, g, v)
		}
	}
	for i := n * out; i < len(res.F); i++ {
		if res.F[i] != sentinel {
			t.Fatalf("MatMul wrote past its output at %d", i)
		}
	}
}

// TestPairs8 checks pairs8's layout against the VPHADDW it replaces, in Go:
// for each row pair the words [r s0-3, r' s0-3 | r s4-7, r' s4-7] of the
// super-block's 16-value sums added in pairs, and no sums for the rows
// beyond the last group of 8 or for blocks of 32.
func TestPairs8(t *testing.T) {
	for _, c := range []struct{ n, kb int }{{7, 1}, {8, 1}, {15, 2}, {16, 3}, {25, 1}} {
		r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.kb)))
		K := 256 * c.kb
		a := actQ{blk: 256, k: K, n: c.n, bs: make([]int16, c.n*K/16)}
		for i := range a.bs {
			a.bs[i] = int16(r.IntN(65536) - 32768) // wrapping sums too
		}
		a.pairs8()
		if len(a.bp) != c.n/8*c.kb*64 {
			t.Fatalf("n=%d kb=%d: %d sums, want %d", c.n, c.kb, len(a.bp), c.n/8*c.kb*64)
		}
		for g := 0; g < c.n/8; g++ {
			for b := 0; b < c.kb; b++ {
				for p := 0; p < 4; p++ {
					// VPHADDW of rows 8g+2p and 8g+2p+1: per 128-bit lane,
					// four sums of the first operand, then four of the second
					var want [16]int16
					for lane := 0; lane < 2; lane++ {
						for i, row := range [2]int{8*g + 2*p, 8*g + 2*p + 1} {
							s := a.bs[row*K/16+16*b+8*lane:]
							for j := 0; j < 4; j++ {
								want[8*lane+4*i+j] = s[2*j] + s[2*j+1]
							}
						}
					}
					got := a.bp[(g*c.kb+b)*64+16*p : (g*c.kb+b)*64+16*p+16]
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("n=%d group %d block %d pair %d word %d: %d, want %d", c.n, g, b, p, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	a := actQ{blk: 32, k: 64, n: 8, bs: make([]int16, 32), tile8Act: tile8Act{bp: make([]int16, 4)}}
	a.pairs8()
	if len(a.bp) != 0 {
		t.Fatalf("blocks of 32: %d sums, want none", len(a.bp))
	}
}

// FuzzTile8P checks dotQ4Kx8PAVX2 and dotQ4Kx8SAVX2 (and MatMul) against
// dotQ4Kx8AVX2 bit for bit on
// weight blocks made from the fuzzer's bytes (scales, mins and d
// included), batches of 8 to 71 rows and reductions of 1 to 20
// super-blocks.
func FuzzTile8P(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(7), uint8(15), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(63), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, in := int(n8%64)+8, int(rows8%9)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q4_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q4_K, data)
		check8P(t, data, randF(r, n*in), n, rows, in, 2)
	})
}
