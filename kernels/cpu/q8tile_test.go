package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// q8TileOld and q8TileNew call the ×8 tile of qtile8_amd64.s and of
// q8tile_amd64.s on weight row o against activation rows m..m+7.
func q8TileOld(t *qmatTask, o, m int, acc *[8]float32) {
	a := &t.act
	K := t.w.C
	nb := K / a.blk
	rb := t.w.DT.RowBytes(K)
	wr, xq, xd8 := &t.w.Q[o*rb], &a.q[m*K], &a.d8[(m/8)*nb*16]
	if t.w.DT == kernels.Q8_0 {
		dotQ8_0x8AVX2(wr, xq, K, xd8, nb, acc)
	} else {
		dotQ4_0x8AVX2(wr, xq, K, xd8, nb, acc)
	}
}

func q8TileNew(t *qmatTask, o, m int, acc *[8]float32) {
	a := &t.act
	K := t.w.C
	nb := K / a.blk
	rb := t.w.DT.RowBytes(K)
	wr, xq, xd8 := &t.w.Q[o*rb], &a.q[m*K], &a.d8[(m/8)*nb*16]
	if t.w.DT == kernels.Q8_0 {
		dotQ8_0x8UAVX2(wr, xq, K, xd8, nb, acc)
	} else {
		dotQ4_0x8UAVX2(wr, xq, K, xd8, &a.s8[(m/8)*nb*8], nb, acc)
	}
}

// BenchmarkQ8Tile times the ×8 tiles of qtile8_amd64.s (old: VPHADDD
// folds; Q4_0 signed through VPSIGNB) and q8tile_amd64.s (new: unpack
// folds; Q4_0 unsigned nibbles) on the same operands in the same process,
// one weight row of 2048 values against 8 activation rows in L1, one
// thread. GMAC/cpu-s counts multiply-adds per CPU-second.
func BenchmarkQ8Tile(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const K = 2048
	r := rand.New(rand.NewPCG(17, 88))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		w, err := kernels.NewHostWeight(dt, 1, K, randBlocks(r, dt, 1, K))
		if err != nil {
			b.Fatal(err)
		}
		x := &kernels.Host{R: 8, C: K, F: randF(r, 8*K)}
		t := &qmatTask{k: kern{avx2: true}, x: x, w: w, n: 8}
		t.act.quantize(t.k, x.F, K, 8, K, 32)
		for _, v := range []struct {
			name string
			f    func(*qmatTask, int, int, *[8]float32)
		}{{"old", q8TileOld}, {"new", q8TileNew}} {
			b.Run(dt.String()+"/"+v.name, func(b *testing.B) {
				var acc [8]float32
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					v.f(t, 0, 0, &acc)
				}
				if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
					b.ReportMetric(8*K*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
				}
			})
		}
	}
}

// TestQ8Tile checks the tiles of q8tile_amd64.s against those of
// qtile8_amd64.s bit for bit (the same integer sums, the same float
// operations in the same order), called directly on every weight row and
// group of 8 activation rows and through qTiles on a range of weight rows
// (nothing written outside it; from 32 rows and 2048 values Q8_0 takes the
// 2×4 tile of q8Pairs there), with a.s8 checked against the activation
// sums; reductions of 1 to 65 blocks, saturated blocks (every weight byte
// 0x80 for Q8_0, 0xff for Q4_0; activations ±1) included.
func TestQ8Tile(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, c := range []struct {
			n, out, nb int
			saturated  bool
		}{
			{8, 1, 1, false}, {8, 5, 2, false}, {9, 7, 3, false}, {16, 9, 8, false}, {17, 12, 31, false},
			{24, 3, 65, false}, {40, 10, 64, false}, {64, 37, 7, false},
			{8, 3, 1, true}, {16, 4, 64, true}, {33, 5, 9, true},
			// the Q8_0 2×4 tile: 32 rows or more, 2048 values or more
			{32, 2, 64, false}, {48, 9, 65, false}, {41, 12, 128, false}, {33, 7, 64, true},
		} {
			t.Run(fmt.Sprintf("%v/n%d/%dx%d/sat=%v", dt, c.n, c.out, 32*c.nb, c.saturated), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.nb)))
				in := 32 * c.nb
				data := randBlocks(r, dt, c.out, in)
				x := randF(r, c.n*in)
				if c.saturated {
					bb, fill := 34, byte(0x80)
					if dt == kernels.Q4_0 {
						bb, fill = 18, 0xff
					}
					for o := 0; o < len(data); o += bb {
						for j := o + 2; j < o+bb; j++ {
							data[j] = fill
						}
					}
					for i := range x {
						x[i] = float32(1 - 2*(i/3%2))
					}
				}
				checkQ8Tile(t, dt, data, x, c.n, c.out, in)
			})
		}
	}
}

// checkQ8Tile checks the q8tile kernels against the qtile8 ones on a Q8_0
// or Q4_0 weight of out×in (data) and n activation rows x.
func checkQ8Tile(t *testing.T, dt kernels.DType, data []byte, x []float32, n, out, in int) {
	t.Helper()
	w, err := kernels.NewHostWeight(dt, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	tk := &qmatTask{k: kern{avx2: true}, x: &kernels.Host{R: n, C: in, F: x}, w: w, n: n}
	tk.act.quantize(tk.k, x, in, n, in, 32)
	a := &tk.act
	nb, n8 := in/32, n&^7
	if len(a.s8) != n8*nb {
		t.Fatalf("len(s8) = %d, want %d", len(a.s8), n8*nb)
	}
	for m := 0; m < n8; m++ {
		for b := 0; b < nb; b++ {
			var s int32
			for _, q := range a.q[m*in+32*b : m*in+32*b+32] {
				s += int32(q)
			}
			if got := a.s8[(m/8*nb+b)*8+m%8]; got != 8*s {
				t.Fatalf("s8 row %d block %d: %d, want %d", m, b, got, 8*s)
			}
		}
	}

	// direct calls
	ref := make([]float32, n*out)
	var acc, want [8]float32
	for m := 0; m < n8; m += 8 {
		for o := 0; o < out; o++ {
			q8TileOld(tk, o, m, &want)
			q8TileNew(tk, o, m, &acc)
			for r := range acc {
				if math.Float32bits(acc[r]) != math.Float32bits(want[r]) {
					t.Fatalf("weight row %d, activation row %d: %v, qtile8 %v", o, m+r, acc[r], want[r])
				}
				ref[(m+r)*out+o] = want[r]
			}
		}
	}

	// through qTiles on weight rows [lo, hi): equal where the ×8 tiles
	// run, written for every activation row, untouched outside
	lo, hi := out/3, out-out/4
	res := &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
	for i := range res.F {
		res.F[i] = float32(math.NaN())
	}
	tk.out = res
	tk.qTiles(lo, hi)
	for i, g := range res.F {
		m, o := i/out, i%out
		switch {
		case o < lo || o >= hi:
			if !math.IsNaN(float64(g)) {
				t.Fatalf("qTiles [%d, %d) wrote [%d,%d]", lo, hi, m, o)
			}
		case m < n8:
			if math.Float32bits(g) != math.Float32bits(ref[i]) {
				t.Fatalf("qTiles [%d,%d]: %v, qtile8 %v", m, o, g, ref[i])
			}
		case math.IsNaN(float64(g)):
			t.Fatalf("qTiles left [%d,%d] unwritten", m, o)
		}
	}
	checkQ8VNNI(t, tk, res.F, lo, hi)
}

// checkQ8VNNI checks the VNNI tiles of q8vnni_amd64.s against the AVX2
// ones of q8tile_amd64.s bit for bit on tk's operands: each tile (the
// transposed ones of Q8_0 and Q4_0 included, on actQ.qt, itself checked)
// called directly on every weight row (pair) and group of 8 (4) activation rows,
// and qTiles on weight rows [lo, hi) with kern.vnni forced on against
// want, the AVX2 qTiles' result. Where the machine has no AVX512_VNNI it
// does nothing.
func checkQ8VNNI(t *testing.T, tk *qmatTask, want []float32, lo, hi int) {
	t.Helper()
	if !hasVNNI {
		return
	}
	a, w := &tk.act, tk.w
	K, n8, out := w.C, tk.n&^7, w.R
	nb, rb := K/a.blk, w.DT.RowBytes(K)
	var got, ref [8]float32
	same := func(what string, o, m int) {
		for r := range got {
			if math.Float32bits(got[r]) != math.Float32bits(ref[r]) {
				t.Fatalf("%s weight row %d, rows %d+%d: VNNI %v, AVX2 %v", what, o, m, r, got[r], ref[r])
			}
		}
	}
	v := *tk
	v.k.vnni = true
	v.act.qt = nil
	{
		v.act.transposeQ8()
		for i, b := range v.act.qt {
			g, rest := i/(nb*256), i%(nb*256)
			blk, j, r, c := rest/256, rest/32%8, rest/4%8, rest%4
			if q := a.q[(8*g+r)*K+32*blk+4*j+c]; b != uint8(q)^0x80 {
				t.Fatalf("qt[%d] = %d, want %d+128", i, b, q)
			}
		}
	}
	qt := v.act.qt
	for m := 0; m < n8; m += 8 {
		xq, xd8 := &a.q[m*K], &a.d8[(m/8)*nb*16]
		for o := 0; o < out; o++ {
			wr := &w.Q[o*rb]
			if w.DT == kernels.Q8_0 {
				dotQ8_0x8UAVX2(wr, xq, K, xd8, nb, &ref)
				dotQ8_0x8VNNI(wr, xq, K, xd8, nb, &got)
			} else {
				s8 := &a.s8[(m/8)*nb*8]
				dotQ4_0x8UAVX2(wr, xq, K, xd8, s8, nb, &ref)
				dotQ4_0x8VNNI(wr, xq, K, xd8, s8, nb, &got)
				same("×8", o, m)
				dotQ4_0x8TVNNI(wr, &qt[(m/8)*nb*256], xd8, s8, nb, &got)
				same("transposed ×8", o, m)
			}
			same("×8", o, m)
			if w.DT == kernels.Q8_0 {
				dotQ8_0x8TVNNI(wr, &qt[(m/8)*nb*256], xd8, nb, &got)
				same("transposed ×8", o, m)
				if o+1 < out {
					var got2 [16]float32
					dotQ8_0x2x8TVNNI(wr, rb, &qt[(m/8)*nb*256], xd8, nb, &got2)
					copy(got[:], got2[:8])
					same("transposed 2×8 (first)", o, m)
					copy(got[:], got2[8:])
					dotQ8_0x8UAVX2(&w.Q[(o+1)*rb], xq, K, xd8, nb, &ref)
					same("transposed 2×8 (second)", o+1, m)
				}
			}
			if w.DT != kernels.Q8_0 || o+1 >= out {
				continue
			}
			for h := 0; h < 8; h += 4 {
				dotQ8_0x2x4AVX2(wr, rb, &a.q[(m+h)*K], K, &a.d8[(m/8)*nb*16+2*h], nb, &ref)
				dotQ8_0x2x4VNNI(wr, rb, &a.q[(m+h)*K], K, &a.d8[(m/8)*nb*16+2*h], nb, &got)
				same("2×4", o, m+h)
			}
		}
	}
	res := &kernels.Host{R: tk.n, C: out, F: make([]float32, tk.n*out)}
	for i := range res.F {
		res.F[i] = float32(math.NaN())
	}
	v.out = res
	v.qTiles(lo, hi)
	for i, g := range res.F {
		if math.Float32bits(g) != math.Float32bits(want[i]) && !(math.IsNaN(float64(g)) && math.IsNaN(float64(want[i]))) {
			t.Fatalf("qTiles with VNNI [%d,%d]: %v, AVX2 %v", i/out, i%out, g, want[i])
		}
	}
}

// FuzzQ8Tile checks the q8tile kernels against the qtile8 ones bit for
// bit on weight blocks made from the fuzzer's bytes (scales included),
// batches of 8 to 71 rows and reductions of 1 to 80 blocks.
func FuzzQ8Tile(f *testing.F) {
	f.Add(false, uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(true, uint8(24), uint8(7), uint8(63), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(false, uint8(63), uint8(1), uint8(79), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, q4 bool, n8, rows8, nb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		dt := kernels.Q8_0
		if q4 {
			dt = kernels.Q4_0
		}
		n, rows, in := int(n8%64)+8, int(rows8%9)+1, (int(nb8%80)+1)*32
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, dt, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(dt, data)
		checkQ8Tile(t, dt, data, randF(r, n*in), n, rows, in)
	})
}
