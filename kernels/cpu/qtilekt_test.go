package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestTileKT checks the Q4_K tiles on transposed super-blocks
// (dotQ4KTx8AVX2, dotQ4KTx16AVX2, dotQ4KTxNAVX2) against dotQ4Kx8PAVX2
// (itself checked against dotQ4Kx8AVX2 by TestTile8P) bit for bit: called
// directly on blocks of 1, 2, 3, … weight rows into output rows with
// padding columns that must stay untouched (and accumulators with
// sentinels past their weight rows × groups), and through MatMul (check8P, whose
// reference is dotQ4Kx8AVX2) at the batches that take them (8–31 rows:
// pairs of groups, a lone group, ×4 and one-row leftovers; 32–137 rows:
// runs of up to ktnGroups groups, ×4 and one-row leftovers; L2 spans of 16
// rows at 16384 values, of 32 at 8192). Saturated blocks (every nibble, scale and min at its maximum,
// activations ±1) check the word sums at their extremes.
func TestTileKT(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		saturated           bool
	}{
		{8, 3, 1, 1, false}, {16, 1, 1, 1, false}, {16, 9, 8, 2, false}, {17, 5, 2, 2, false}, {24, 13, 3, 1, false},
		{31, 20, 8, 2, false}, {16, 3, 32, 2, false}, {28, 4, 64, 2, false}, {16, 6, 8, 1, true}, {24, 5, 2, 2, true},
		{32, 5, 2, 1, false}, {41, 3, 1, 2, false}, {128, 14, 8, 2, false}, {136, 9, 8, 1, false}, {137, 4, 3, 2, false},
		{72, 3, 64, 2, false}, {64, 3, 32, 1, false}, {128, 6, 8, 2, true}, {136, 2, 2, 1, true},
		{40, 37, 2, 2, false}, {96, 33, 32, 1, false},
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%v", c.n, c.out, c.kb*256, c.threads, c.saturated), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n)+16, uint64(c.out*c.kb+3)))
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
			checkKT(t, data, x, c.n, c.out, in)
			check8P(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// checkKT calls dotQ4KTx8AVX2 on every group of 8 rows of x and
// dotQ4KTx16AVX2 on every pair (in their layout: below qTileMinRows rows
// and ktnMinK values),
// and dotQ4KTxNAVX2 on runs of 1 to all the
// groups (from every group for runs of 1 and 2, from the first two for
// longer ones), on blocks of 1, 2, 3, … weight rows of data (out×in), into
// an output of out+3 columns, and checks each result against
// dotQ4Kx8PAVX2 bit for bit and the rest of the output against writes.
func checkKT(t *testing.T, data []byte, x []float32, n, out, in int) {
	t.Helper()
	var a actQ
	a.quantize(kern{avx2: true}, x, in, n, in, 256)
	nb, rb := in/256, kernels.Q4_K.RowBytes(in)
	if len(a.kt) != n/8*nb*2048 {
		t.Fatalf("transposeK made %d bytes, want %d", len(a.kt), n/8*nb*2048)
	}
	oc := out + 3
	res := make([]float32, n*oc)
	sentinel := float32(math.Inf(-1))
	var want [8]float32
	for _, tile := range []string{"x8", "x16", "xN"} {
		for groups := 1; groups <= n/8; groups++ {
			gs, _ := a.ktStrides()
			own := gs == 2048*nb // the layout of the ×8 and ×16 tiles
			if (tile == "x8" && (groups != 1 || !own)) || (tile == "x16" && (groups != 2 || !own)) || (tile == "xN" && groups > 2*ktnGroups+1) {
				continue
			}
			for m := 0; m+8*groups <= n&^7; m += 8 {
				if groups > 2 && m > 8 {
					break
				}
				for i := range res {
					res[i] = sentinel
				}
				for ob, blk := 0, 1; ob < out; ob, blk = ob+blk, blk+1 {
					oe := min(ob+blk, out)
					g := m / 8
					gs, ss := a.ktStrides()
					xt, xd8, bp, o := &a.kt[g*gs], &a.d8[g*nb*16], &a.bp8(m, nb)[0], &res[m*oc+ob]
					switch tile {
					case "x8":
						dotQ4KTx8AVX2(&data[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
					case "x16":
						dotQ4KTx16AVX2(&data[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
					default:
						// accumulators for (oe-ob)·groups, then sentinels
						acc := make([]float32, (oe-ob)*groups*16+8)
						for i := (oe - ob) * groups * 16; i < len(acc); i++ {
							acc[i] = sentinel
						}
						dotQ4KTxNAVX2(&data[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc, groups, &acc[0], gs, ss)
						for i := (oe - ob) * groups * 16; i < len(acc); i++ {
							if acc[i] != sentinel {
								t.Fatalf("%s: accumulators written past %d rows × %d groups", tile, oe-ob, groups)
							}
						}
					}
				}
				for r := 0; r < n; r++ {
					for o := 0; o < oc; o++ {
						g := res[r*oc+o]
						if (r < m || r >= m+8*groups || o >= out) != (g == sentinel) {
							t.Fatalf("%s, %d groups at row %d: [%d,%d] = %v: written outside its rows or columns, or not written", tile, groups, m, r, o, g)
						}
					}
				}
				for g := m; g < m+8*groups; g += 8 {
					for o := 0; o < out; o++ {
						dotQ4Kx8PAVX2(&data[o*rb], &a.q[g*in], in, &a.d8[(g/8)*nb*16], &a.bp8(g, nb)[0], nb, &want)
						for r := range want {
							if got := res[(g+r)*oc+o]; math.Float32bits(got) != math.Float32bits(want[r]) {
								t.Fatalf("%s, %d groups: weight row %d, activation row %d: %v, dotQ4Kx8PAVX2 %v", tile, groups, o, g+r, got, want[r])
							}
						}
					}
				}
			}
		}
	}
}

// TestTransposeK checks transposeK's layout (made by transposeKAVX2 where
// AVX2 is there; transposeKGo must make the same bytes): groups' super-blocks
// contiguous below qTileMinRows rows and ktnMinK values, super-blocks'
// groups otherwise, as ktStrides says): chunk v of a row's
// super-block holds, for each 128-bit lane l and sub-block w, its values
// 16l+2v and 16l+2v+1; and no transposed rows below 8 rows or for blocks
// of 32.
func TestTransposeK(t *testing.T) {
	for _, c := range []struct{ n, kb int }{{7, 1}, {8, 1}, {15, 2}, {16, 3}, {31, 1}, {32, 1}, {137, 2}, {16, 16}, {24, 32}} {
		r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.kb)))
		K := 256 * c.kb
		a := actQ{blk: 256, k: K, n: c.n, q: make([]int8, c.n*K)}
		for i := range a.q {
			a.q[i] = int8(r.IntN(256) - 128)
		}
		a.transposeK()
		g := c.n / 8
		if len(a.kt) != g*c.kb*2048 {
			t.Fatalf("n=%d kb=%d: %d bytes, want %d", c.n, c.kb, len(a.kt), g*c.kb*2048)
		}
		wantGS, wantSS := 2048*c.kb, 2048 // a group's super-blocks contiguous
		if c.n >= 32 || K >= 4096 {
			wantGS, wantSS = 2048, 2048*g // a super-block's groups contiguous
		}
		if gs, ss := a.ktStrides(); gs != wantGS || ss != wantSS {
			t.Fatalf("n=%d kb=%d: strides %d, %d, want %d, %d", c.n, c.kb, gs, ss, wantGS, wantSS)
		}
		// the plain-Go transposition (the AVX2 one where transposeK took
		// it) makes the same bytes
		gs, ss := a.ktStrides()
		goKT := actQ{blk: 256, k: K, n: c.n, q: a.q, tile8Act: tile8Act{kt: make([]int8, len(a.kt))}}
		goKT.transposeKGo(c.kb, g, gs, ss)
		if !slices.Equal(goKT.kt, a.kt) {
			t.Fatalf("n=%d kb=%d: transposeK and transposeKGo differ", c.n, c.kb)
		}
		for gi := 0; gi < g; gi++ {
			for b := 0; b < c.kb; b++ {
				for row := 0; row < 8; row++ {
					got := a.kt[gi*gs+b*ss+row*256:][:256]
					src := a.q[(8*gi+row)*K+256*b:][:256]
					for v := 0; v < 8; v++ {
						for l := 0; l < 2; l++ {
							for w := 0; w < 8; w++ {
								for e := 0; e < 2; e++ {
									if want := src[32*w+16*l+2*v+e]; got[32*v+16*l+2*w+e] != want {
										t.Fatalf("n=%d group %d block %d row %d chunk %d lane %d sub-block %d: %d, want %d", c.n, gi, b, row, v, l, w, got[32*v+16*l+2*w+e], want)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	a := actQ{blk: 32, k: 256, n: 8, q: make([]int8, 8*256), tile8Act: tile8Act{kt: make([]int8, 4)}}
	a.transposeK()
	if len(a.kt) != 0 {
		t.Fatalf("blocks of 32: %d bytes, want none", len(a.kt))
	}
}

// FuzzTileKT checks dotQ4KTx8AVX2, dotQ4KTx16AVX2 and dotQ4KTxNAVX2
// (directly and through MatMul) against the ×8 tiles bit for bit on weight
// blocks made from the fuzzer's bytes (scales, mins and d included),
// batches of 8 to 137 rows and reductions of 1 to 20 super-blocks.
func FuzzTileKT(f *testing.F) {
	f.Add(uint8(8), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(16), uint8(7), uint8(15), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(23), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Add(uint8(120), uint8(16), uint8(7), []byte{0xff, 0xff, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, in := int(n8%130)+8, int(rows8%17)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q4_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q4_K, data)
		x := randF(r, n*in)
		checkKT(t, data, x, n, rows, in)
		check8P(t, data, x, n, rows, in, 2)
	})
}

// BenchmarkTileKT times one block of 8 Q4_K weight rows against 16
// activation rows, over and over, for 512-value reductions (every operand
// in L1: the tiles' own rate), 2048 and 8192 (activations from L2): the
// ×8 tile on precomputed sums (rows8's calls, two per weight row), and the
// transposed tiles ×8 (two calls) and ×16.
// GMAC/cpu-s counts multiply-adds per CPU-second.
func BenchmarkTileKT(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	for _, in := range []int{512, 2048, 8192} {
		const rows, n = 8, 16
		r := rand.New(rand.NewPCG(16, uint64(in)))
		data := randBlocks(r, kernels.Q4_K, rows, in)
		var a actQ
		a.quantize(kern{avx2: true}, randF(r, n*in), in, n, in, 256)
		nb, rb := in/256, kernels.Q4_K.RowBytes(in)
		res := make([]float32, n*rows)
		run := func(b *testing.B, f func()) {
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				f()
			}
			if s := (processCPU() - c0).Seconds(); s > 0 {
				b.ReportMetric(float64(rows*n*in)*float64(b.N)/s/1e9, "GMAC/cpu-s")
			}
		}
		b.Run(fmt.Sprintf("%d/p8", in), func(b *testing.B) {
			var acc [8]float32
			run(b, func() {
				for m := 0; m < n; m += 8 {
					for o := 0; o < rows; o++ {
						dotQ4Kx8PAVX2(&data[o*rb], &a.q[m*in], in, &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &acc)
						for j := range acc {
							res[(m+j)*rows+o] = acc[j]
						}
					}
				}
			})
		})
		b.Run(fmt.Sprintf("%d/t8", in), func(b *testing.B) {
			run(b, func() {
				for m := 0; m < n; m += 8 {
					dotQ4KTx8AVX2(&data[0], rb, rows, &a.kt[(m/8)*nb*2048], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &res[m*rows], rows)
				}
			})
		})
		b.Run(fmt.Sprintf("%d/t16", in), func(b *testing.B) {
			run(b, func() {
				dotQ4KTx16AVX2(&data[0], rb, rows, &a.kt[0], &a.d8[0], &a.bp8(0, nb)[0], nb, &res[0], rows)
			})
		})
	}
}
