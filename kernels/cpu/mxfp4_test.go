package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// randMXFP4 returns rows random MXFP4 rows of cols values: random codes
// (every nibble value) and scale bytes spread over [lo, lo+span), with
// some all-zero blocks of scale 0 as quant.QuantizeMXFP4 writes them.
func randMXFP4(r *rand.Rand, rows, cols int, lo, span int) []byte {
	data := make([]byte, rows*quant.MXFP4RowBytes(cols))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := 0; b < len(data); b += quant.MXFP4BlockBytes {
		data[b] = byte(lo + r.IntN(span))
		if r.IntN(16) == 0 {
			clear(data[b : b+quant.MXFP4BlockBytes])
		}
	}
	return data
}

// TestMXFP4MatMul checks MatMul on MXFP4 weights, with the AVX2 kernels
// (batch-1 row loop, 4-row tile and the rows left over) and the Go twins,
// against the float64 product of quant's decoded weights: equal to float32
// rounding on the quantized activations and within the activation-rounding
// bound of the exact product. Shapes include gpt-oss-20b's 2880.
func TestMXFP4MatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 1))
	for _, c := range []struct{ n, out, in int }{
		{1, 1, 32}, {1, 3, 64}, {1, 64, 32}, {2, 7, 96}, {3, 13, 128}, {4, 5, 32}, {4, 17, 160},
		{5, 33, 64}, {7, 9, 96}, {8, 64, 256}, {16, 31, 128}, {17, 4, 64}, {1, 301, 2880}, {6, 40, 2880},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", c.n, c.out, c.in), func(t *testing.T) {
			checkStored(t, kernels.MXFP4, randMXFP4(r, c.out, c.in, 118, 18), randF(r, c.n*c.in), c.n, c.out, c.in, 2)
		})
	}
}

// TestMXFP4Exact checks the path without quantized activations
// (Options.QuantizeActivations off, as for Q8_0): equal to the float64
// product of the decoded weights and the float activations to float32
// rounding, for one row and batches, and through MatMulExperts.
func TestMXFP4Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 8))
	b := New(Options{Threads: 2})
	defer b.Close()
	for _, c := range []struct{ n, out, in int }{{1, 7, 64}, {1, 300, 2880}, {5, 64, 256}, {16, 40, 96}} {
		data := randMXFP4(r, c.out, c.in, 118, 18)
		w, err := kernels.NewHostWeight(kernels.MXFP4, c.out, c.in, data)
		if err != nil {
			t.Fatal(err)
		}
		x := randF(r, c.n*c.in)
		exact, _, _, mag := storedRef(w, x, c.n) // on the float activations
		for _, experts := range []bool{false, true} {
			got := b.Alloc(c.n, c.out).(*kernels.Host)
			xh := &kernels.Host{R: c.n, C: c.in, F: x}
			if experts {
				b.MatMulExperts(got, xh, []kernels.Tensor{w}, []int32{0, int32(c.n)})
			} else {
				b.MatMul(got, xh, w, c.n)
			}
			for i, g := range got.F {
				m, o := i/c.out, i%c.out
				j := m*w.R + o
				if d := math.Abs(float64(g) - exact[j]); d > 2e-6*mag[j]+1e-6 {
					t.Fatalf("n=%d %dx%d experts=%v [%d,%d]: %v, want %v", c.n, c.out, c.in, experts, m, o, g, exact[j])
				}
			}
		}
	}
}

// TestMXFP4Scales sweeps the scale bytes over the whole finite range
// whose products stay finite in float32, and feeds activation rows that
// stress the quantizer.
func TestMXFP4Scales(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 2))
	for _, lo := range []int{0, 1, 2, 60, 127, 180, 200} {
		in := 256
		x := randF(r, 4*in)
		clear(x[:in])
		x[in+5] = 1e6
		for j := 0; j < in; j++ {
			x[2*in+j] = float32(j%7-3) * 127
		}
		checkStored(t, kernels.MXFP4, randMXFP4(r, 9, in, lo, 8), x, 4, 9, in, 1)
		checkStored(t, kernels.MXFP4, randMXFP4(r, 9, in, lo, 8), x[in:2*in], 1, 9, in, 1)
	}
}

// TestMXFP4Kernels compares the AVX2 kernels with the Go twin on the same
// quantized activations: the row loop (groups of four rows and the rows
// left over) and the 2-, 3- and 4-row tiles equal the single-row kernel
// bit for bit (a row's result does not depend on the batch it is in), and
// all equal the twin to float32 rounding.
func TestMXFP4Kernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 3))
	fast, plain := kern{avx2: true}, kern{}
	for _, nb := range []int{1, 2, 3, 8, 90} {
		for _, rows := range []int{1, 2, 4, 5, 9} {
			in := nb * 32
			data := randMXFP4(r, rows, in, 120, 14)
			x := randF(r, 4*in)
			var a actQ
			a.quantize(kern{}, x, in, 4, in, 32)
			a.mxfp4Corr(1, 1)
			out := make([]float32, rows)
			mxfp4Rows(fast, data, &a, nb, rows, out) // one row at a time (no tables)
			var a1 actQ                              // activation row 0 alone: the tables
			a1.quantize(kern{}, x[:in], in, 1, in, 32)
			a1.mxfp4Corr(1, 1)
			if !a1.mxsOK {
				t.Fatal("no scale tables for a single activation row")
			}
			out1 := make([]float32, rows)
			mxfp4Rows(fast, data, &a1, nb, rows, out1)
			for o := range out1 {
				if math.Float32bits(out1[o]) != math.Float32bits(out[o]) {
					t.Errorf("nb=%d rows=%d row %d: table loop %v, row loop %v", nb, rows, o, out1[o], out[o])
				}
			}
			rb := kernels.MXFP4.RowBytes(in)
			for o := 0; o < rows; o++ {
				wr := data[o*rb : (o+1)*rb]
				g := fast.rowDot(kernels.MXFP4, wr, x[:in], &a, 0)
				if math.Float32bits(g) != math.Float32bits(out[o]) {
					t.Errorf("nb=%d rows=%d row %d: loop %v, row kernel %v", nb, rows, o, out[o], g)
				}
				for R := 2; R <= 4; R++ {
					acc := [4]float32{-1, -1, -1, -1}
					mxfp4Tile(wr, &a, 4-R, R, in, &acc)
					for m := 0; m < 4; m++ {
						if m >= R {
							if acc[m] != 0 {
								t.Errorf("nb=%d R=%d: out[%d] = %v, want 0", nb, R, m, acc[m])
							}
							continue
						}
						p := plain.rowDot(kernels.MXFP4, wr, x[(4-R+m)*in:(5-R+m)*in], &a, 4-R+m)
						if f := fast.rowDot(kernels.MXFP4, wr, x[(4-R+m)*in:(5-R+m)*in], &a, 4-R+m); math.Float32bits(f) != math.Float32bits(acc[m]) {
							t.Errorf("nb=%d row %d R=%d act %d: tile %v, row kernel %v", nb, o, R, m, acc[m], f)
						}
						if !close32(acc[m], p, 1e-4) {
							t.Errorf("nb=%d row %d R=%d act %d: tile %v, go %v", nb, o, R, m, acc[m], p)
						}
					}
				}
				if p := plain.rowDot(kernels.MXFP4, wr, x[:in], &a, 0); !close32(g, p, 1e-4) {
					t.Errorf("nb=%d row %d: avx2 %v, go %v", nb, o, g, p)
				}
			}
		}
	}
}

// ifVNNI returns f where the machine runs the VNNI kernels, else nil.
func ifVNNI(f func()) func() {
	if !hasVNNI {
		return nil
	}
	return f
}

// TestMXFP4Weight checks that both backends keep MXFP4 bytes in place,
// reject bad shapes, and embed rows as quant's decoder does.
func TestMXFP4Weight(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 4))
	data := randMXFP4(r, 5, 64, 120, 14)
	for _, be := range []kernels.Backend{New(Options{Threads: 2}), kernels.NewRef()} {
		wt, err := be.Weight(kernels.MXFP4, 5, 64, data)
		if err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		if wh := wt.(*kernels.Host); &wh.Q[0] != &data[0] || len(wh.Q) != len(data) || wh.F != nil {
			t.Errorf("%s: weight does not use the caller's bytes in place", be.Name())
		}
		if _, err := be.Weight(kernels.MXFP4, 5, 64, data[:len(data)-1]); err == nil {
			t.Errorf("%s: short data accepted", be.Name())
		}
		if _, err := be.Weight(kernels.MXFP4, 1, 48, data[:quant.MXFP4RowBytes(64)]); err == nil {
			t.Errorf("%s: 48 columns (not whole blocks) accepted", be.Name())
		}
		out := be.Alloc(2, 64)
		be.Embed(out, wt, []int32{4, 1})
		got := be.ToHost(out, 2)
		want := make([]float32, 64)
		for i, tok := range []int{4, 1} {
			quant.DequantizeMXFP4(want, data[tok*34:(tok+1)*34])
			for j, v := range want {
				if got[i*64+j] != v {
					t.Fatalf("%s: embed row %d [%d] = %v, want %v", be.Name(), tok, j, got[i*64+j], v)
				}
			}
		}
		be.Close()
	}
}

// FuzzMXFP4MatMul checks MXFP4 MatMul on weight bytes from the fuzzer
// (codes and scales; scales kept where float32 products stay finite)
// against the float64 reference.
func FuzzMXFP4MatMul(f *testing.F) {
	f.Add(uint8(1), uint8(3), uint8(2), []byte{1, 2, 3})
	f.Add(uint8(4), uint8(5), uint8(1), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(2), uint8(8), uint8(4), []byte{0x00, 0x88, 0x77})
	f.Fuzz(func(t *testing.T, n8, rows8, nb8 uint8, seed []byte) {
		n, rows, nb := int(n8%9)+1, int(rows8%9)+1, int(nb8%5)+1
		in := 32 * nb
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randMXFP4(r, rows, in, 120, 14)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		for b := 0; b < len(data); b += quant.MXFP4BlockBytes {
			data[b] = min(data[b], 200) // 2^73 · 12 · 127 · 32 stays finite
		}
		checkStored(t, kernels.MXFP4, data, randF(r, n*in), n, rows, in, 2)
	})
}

// BenchmarkMXFP4MatVec measures batch-1 MatMul on MXFP4 weights at
// gpt-oss-20b's expert shapes (2880 wide; gate and up 2880 rows each, or
// fused 5760), reporting weight bytes per second of wall time and per CPU
// second: new/cold cycles through 256 MB of distinct matrices (weights
// come from memory, as in decode), new/hot repeats one matrix (it stays in
// the last-level cache: the kernels' compute rate), old is the plain-Go
// reference matvec it replaces (kernels.MatVecMXFP4, one goroutine).
//
//	go test ./kernels/cpu -run XXX -bench MXFP4MatVec -benchtime 50x
func BenchmarkMXFP4MatVec(b *testing.B) {
	r := rand.New(rand.NewPCG(20, 5))
	for _, sh := range []struct{ rows, cols int }{{2880, 2880}, {5760, 2880}} {
		size := sh.rows * quant.MXFP4RowBytes(sh.cols)
		mats := make([][]byte, max(1, 256<<20/size))
		for i := range mats {
			mats[i] = randMXFP4Fast(r, sh.rows, sh.cols)
		}
		x := randF(r, sh.cols)
		for _, v := range []string{"new/cold", "new/hot", "old"} {
			b.Run(fmt.Sprintf("%dx%d/%s", sh.rows, sh.cols, v), func(b *testing.B) {
				be := New(Options{Threads: 0, QuantizeActivations: true})
				defer be.Close()
				ws := make([]kernels.Tensor, len(mats))
				for i, m := range mats {
					w, err := be.Weight(kernels.MXFP4, sh.rows, sh.cols, m)
					if err != nil {
						b.Fatal(err)
					}
					ws[i] = w
				}
				xh := &kernels.Host{R: 1, C: sh.cols, F: x}
				out := be.Alloc(1, sh.rows)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				c0 := processCPU()
				for i := 0; b.Loop(); i++ {
					x[0] = float32(i) // new activations each step, as in decode
					switch v {
					case "old":
						kernels.MatVecMXFP4(out.(*kernels.Host).F, x, mats[0], sh.rows, sh.cols)
					case "new/hot":
						be.MatMul(out, xh, ws[0], 1)
					default:
						be.MatMul(out, xh, ws[i%len(ws)], 1)
					}
				}
				if cpu := (processCPU() - c0).Seconds(); cpu > 0 {
					b.ReportMetric(float64(size)*float64(b.N)/cpu/1e9, "GB/cpu-s")
				}
			})
		}
	}
}

// randMXFP4Fast is randMXFP4 for large matrices: random bytes eight at a
// time, scale bytes in [118, 126).
func randMXFP4Fast(r *rand.Rand, rows, cols int) []byte {
	data := make([]byte, rows*quant.MXFP4RowBytes(cols))
	for i := 0; i < len(data); i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, len(data)); j++ {
			data[j] = byte(v)
			v >>= 8
		}
	}
	for b := 0; b < len(data); b += quant.MXFP4BlockBytes {
		data[b] = byte(118 + b%8)
	}
	return data
}

// BenchmarkMXFP4Kernels measures the AVX2 kernels alone on one thread with
// the weights in L2 (64 rows of 2880): CPU-ns per 32-value block for the
// batch-1 row loop (rows: with the scale tables, four weight rows at a
// time; rows1: one row at a time, as for rows of a batch), and per block
// and activation row for the 4- and 2-row tiles (tileR: the scale products
// made in the loop; tabR: with the activation rows' scale tables, two
// weight rows at a time; zR and rows-vnni: the AVX-512 VNNI kernels).
//
//	go test ./kernels/cpu -run XXX -bench MXFP4Kernels -benchtime 3000x
func BenchmarkMXFP4Kernels(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const rows, in = 64, 2880
	nb := in / 32
	rb := 17 * nb
	// e14: scale bytes over 14 values; e2: over 2, as gen-model writes them
	for _, span := range []int{14, 2} {
		r := rand.New(rand.NewPCG(20, 10))
		data := randMXFP4(r, rows, in, 120, span)
		var a, a1 actQ // 4 activation rows, and row 0 alone (both with scale tables)
		x := randF(r, 4*in)
		a.quantize(kern{avx2: true}, x, in, 4, in, 32)
		a.mxfp4Corr(1, 1)
		a1.quantize(kern{avx2: true}, x[:in], in, 1, in, 32)
		a1.mxfp4Corr(1, 1)
		out := make([]float32, rows)
		var acc [4]float32
		tile := func(R int) func() {
			return func() {
				for o := 0; o < rows; o++ {
					mxfp4Tile(data[o*rb:(o+1)*rb], &a, 0, R, in, &acc)
				}
			}
		}
		outR := make([]float32, 4*rows)
		tab := func(R int) func() {
			return func() { mxfp4TabTile(data, rb, &a, 0, R, rows, outR, rows) }
		}
		// rows-vnni, zR: the AVX-512 VNNI row loop and tiles (mxvnni.go),
		// no scale tables, and nz: on the same weights with the cleared
		// blocks' scale byte 0 set to 120 (the loops that make the scale
		// products take a microcode assist for each denormal product;
		// real weights hold no such bytes), against tabR-nz
		a.mxfp4Corr32()
		a1.mxfp4Corr32()
		nz := append([]byte(nil), data...)
		for i := 0; i < len(nz); i += 17 {
			if nz[i] == 0 {
				nz[i] = 120
			}
		}
		zt := func(w []byte, R int) func() {
			return func() { mxfp4TileVNNI(w, rb, &a, 0, R, rows/2, outR, rows) }
		}
		// tabRm: the same tiles on weights from memory (256 MB of rows,
		// a different block of 64 rows each op, as at batched decode)
		// grpR: the group tiles (mxgroup.go) of R activation rows
		var a8 actQ
		x8 := randF(r, 8*in)
		a8.quantize(kern{avx2: true}, x8, in, 8, in, 32)
		a8.mxfp4Corr(8, 8)
		grp := func(R int) func() {
			t := qmatTask{k: kern{avx2: true}, w: &kernels.Host{R: rows, C: in, DT: kernels.MXFP4, Q: data},
				out: &kernels.Host{R: R, C: rows, F: make([]float32, R*rows)}, n: R, act: a8}
			return func() { t.mxgTiles(0, rows) }
		}
		big := randMXFP4Fast(r, 256<<20/rb, in)
		chunk := 0
		tabMem := func(R int, vnni bool) func() {
			return func() {
				n := len(big) / (rows * rb)
				c := big[(chunk%n)*rows*rb:]
				chunk++
				if vnni {
					mxfp4TileVNNI(c, rb, &a, 0, R, rows/2, outR, rows)
					return
				}
				mxfp4TabTile(c, rb, &a, 0, R, rows, outR, rows)
			}
		}
		for _, v := range []struct {
			name string
			per  int // blocks × activation rows per op
			run  func()
		}{
			{"rows", rows * nb, func() { mxfp4Rows(kern{avx2: true}, data, &a1, nb, rows, out) }},
			{"rows1", rows * nb, func() { mxfp4Rows(kern{avx2: true}, data, &a, nb, rows, out) }},
			{"tile4", 4 * rows * nb, tile(4)},
			{"tile3", 3 * rows * nb, tile(3)},
			{"tile2", 2 * rows * nb, tile(2)},
			{"tab4", 4 * rows * nb, tab(4)},
			{"tab3", 3 * rows * nb, tab(3)},
			{"tab2", 2 * rows * nb, tab(2)},
			{"grp8", 8 * rows * nb, grp(8)},
			{"grp4", 4 * rows * nb, grp(4)},
			{"grp2", 2 * rows * nb, grp(2)},
			{"tab4m", 4 * rows * nb, tabMem(4, false)},
			{"tab2m", 2 * rows * nb, tabMem(2, false)},
			{"rows-vnni", rows * nb, ifVNNI(func() { mxfp4Rows(kern{avx2: true, vnni: true}, data, &a1, nb, rows, out) })},
			{"z4", 4 * rows * nb, ifVNNI(zt(data, 4))},
			{"z3", 3 * rows * nb, ifVNNI(zt(data, 3))},
			{"z2", 2 * rows * nb, ifVNNI(zt(data, 2))},
			{"rows-nz", rows * nb, func() { mxfp4Rows(kern{avx2: true}, nz, &a1, nb, rows, out) }},
			{"rows-vnni-nz", rows * nb, ifVNNI(func() { mxfp4Rows(kern{avx2: true, vnni: true}, nz, &a1, nb, rows, out) })},
			{"tab4-nz", 4 * rows * nb, func() { mxfp4TabTile(nz, rb, &a, 0, 4, rows, outR, rows) }},
			{"tab2-nz", 2 * rows * nb, func() { mxfp4TabTile(nz, rb, &a, 0, 2, rows, outR, rows) }},
			{"z4-nz", 4 * rows * nb, ifVNNI(zt(nz, 4))},
			{"z3-nz", 3 * rows * nb, ifVNNI(zt(nz, 3))},
			{"z2-nz", 2 * rows * nb, ifVNNI(zt(nz, 2))},
			{"z4m", 4 * rows * nb, ifVNNI(tabMem(4, true))},
			{"z2m", 2 * rows * nb, ifVNNI(tabMem(2, true))},
		} {
			b.Run(fmt.Sprintf("e%d/%s", span, v.name), func(b *testing.B) {
				if v.run == nil {
					b.Skip("no AVX-512 VNNI on this machine or build")
				}
				c0 := processCPU()
				for b.Loop() {
					v.run()
				}
				b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N*v.per), "cpu-ns/block")
			})
		}
	}
}
