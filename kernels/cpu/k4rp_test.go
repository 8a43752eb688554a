package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// checkQ4KRows1R repacks rows Q4_K rows of nb blocks and checks that
// q4kRows1R on them writes len(out) results only, each equal bit for bit
// to q4kRows1's on the file's rows, and that unrepacking gives the file's
// bytes back.
func checkQ4KRows1R(t *testing.T, data []byte, x []float32, rows, nb int) {
	t.Helper()
	in := nb * 256
	var a actQ
	a.quantize(kern{avx2: true}, x, in, 1, in, 256)
	qp := make([]int8, in)
	permuteQ4KAct(qp, a.q[:in])
	rp := make([]byte, len(data))
	quant.RepackQ4K(rp, data)
	back := append([]byte(nil), rp...)
	quant.UnrepackQ4K(back, back)
	if !bytes.Equal(back, data) {
		t.Fatalf("%d rows × %d blocks: unrepacking does not give the file's bytes", rows, nb)
	}
	want := make([]float32, rows)
	q4kRows1(data, a.q, a.d, a.bs, nb, want)
	got := make([]float32, rows+2)
	got[rows], got[rows+1] = 12345, -6789 // must stay
	q4kRows1R(rp, qp, a.d, a.bs, nb, got[:rows])
	if got[rows] != 12345 || got[rows+1] != -6789 {
		t.Fatalf("%d rows × %d blocks: wrote past the rows", rows, nb)
	}
	for o := range want {
		if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
			t.Fatalf("%d rows × %d blocks, row %d = %v, the file's loop gives %v", rows, nb, o, got[o], want[o])
		}
	}
}

// TestQ4KRows1R checks the repacked two-stream loop against the file
// layout's loop on the row counts and lengths of TestQ4KRows1, random and
// saturated blocks.
func TestQ4KRows1R(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 47))
	for _, sat := range []bool{false, true} {
		for _, nb := range []int{1, 2, 3, 8, 32} {
			for _, rows := range []int{1, 2, 3, 4, 5, 9, 10, 31, 64, 65, 97} {
				t.Run(fmt.Sprintf("sat=%v/%dx%d", sat, rows, nb), func(t *testing.T) {
					in := nb * 256
					data := randBlocks(r, kernels.Q4_K, rows, in)
					x := randF(r, in)
					if sat {
						saturateQ4K(data, x)
					}
					checkQ4KRows1R(t, data, x, rows, nb)
				})
			}
		}
	}
}

// TestRepackQ4KLayout checks repackQ4K against its definition value by
// value: repacked byte 4j+k of group g holds, for k < 2, values 4j+k and
// 4j+k+2 of sub-block 2g, for k ≥ 2 values 4j+k−2 and 4j+k of sub-block
// 2g+1; the permuted activations follow the same order.
func TestRepackQ4KLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	blk := make([]byte, 144)
	for i := range blk {
		blk[i] = byte(r.Uint32())
	}
	val := func(v int) byte { // value v (0..255) of the file's block
		g, i := v/64, v%64
		if i < 32 {
			return blk[16+32*g+i] & 15
		}
		return blk[16+32*g+i-32] >> 4
	}
	rp := make([]byte, 144)
	quant.RepackQ4K(rp, blk)
	if !bytes.Equal(rp[:16], blk[:16]) {
		t.Fatal("d, dmin or scales moved")
	}
	x := make([]int8, 256)
	for i := range x {
		x[i] = int8(i - 128)
	}
	xp := make([]int8, 256)
	permuteQ4KAct(xp, x)
	for g := 0; g < 4; g++ {
		for j := 0; j < 8; j++ {
			for k := 0; k < 4; k++ {
				lo := 64*g + 4*j + k // value in the low nibble
				if k >= 2 {
					lo = 64*g + 32 + 4*j + k - 2
				}
				b := rp[16+32*g+4*j+k]
				if b&15 != val(lo) || b>>4 != val(lo+2) {
					t.Fatalf("group %d byte %d = %#x, want values %d and %d (%d, %d)", g, 4*j+k, b, lo, lo+2, val(lo), val(lo+2))
				}
				if xp[64*g+4*j+k] != x[lo] || xp[64*g+32+4*j+k] != x[lo+2] {
					t.Fatalf("group %d activation %d: %d/%d, want %d/%d", g, 4*j+k, xp[64*g+4*j+k], xp[64*g+32+4*j+k], x[lo], x[lo+2])
				}
			}
		}
	}
}

// FuzzQ4KRepack checks, on Q4_K rows from the fuzzer's bytes (d and dmin
// kept finite), that unrepacking restores them and that the repacked loop
// equals the file layout's bit for bit.
func FuzzQ4KRepack(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint8(7), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(98), uint8(11), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(0), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, rows8, nb8 uint8, seed []byte) {
		rows, nb := int(rows8%100)+1, int(nb8%12)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(rows*nb)))
		data := randBlocks(r, kernels.Q4_K, rows, nb*256)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		for o := 0; o < len(data); o += 144 {
			data[o+1] &= 0xbb
			data[o+3] &= 0xbb
		}
		checkQ4KRows1R(t, data, randF(r, nb*256), rows, nb)
	})
}

// BenchmarkQ4KRepack compares the two-stream Q4_K loop on the file's
// layout (q4kRows1, served) with the repacked loop (q4kRows1R) on one
// thread, alternated within each iteration: weights in L2 (256 rows) and
// streamed from memory (streamBytes of rows in chunks of 256 rows), rows
// of 2048 and 8192 values. GB/cpu-s counts weight bytes per CPU-second.
func BenchmarkQ4KRepack(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const chunk = 256
	r := rand.New(rand.NewPCG(17, 48))
	for _, in := range []int{2048, 8192} {
		var a actQ
		a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 256)
		qp := make([]int8, in)
		permuteQ4KAct(qp, a.q[:in])
		nb := in / 256
		rb := kernels.Q4_K.RowBytes(in)
		for _, place := range []struct {
			name string
			rows int
		}{{"L2", 256 * 2048 / in}, {"mem", streamBytes / rb}} {
			b.Run(fmt.Sprintf("k%d/%s", in, place.name), func(b *testing.B) {
				ch := min(chunk, place.rows)
				rows := place.rows / ch * ch
				data := randBlocks(r, kernels.Q4_K, rows, in)
				rp := make([]byte, len(data))
				quant.RepackQ4K(rp, data)
				out := make([]float32, rows)
				loops := [2]func(o int){
					func(o int) { q4kRows1(data[o*rb:(o+ch)*rb], a.q, a.d, a.bs, nb, out[o:o+ch]) },
					func(o int) { q4kRows1R(rp[o*rb:(o+ch)*rb], qp, a.d, a.bs, nb, out[o:o+ch]) },
				}
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for j := range loops {
						v := (i + j) % 2
						c0 := processCPU()
						for o := 0; o < rows; o += ch {
							loops[v](o)
						}
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"file", "repacked"} {
					if cpu[v] > 0 {
						b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
					}
				}
			})
		}
	}
}

// TestTileKTRepacked checks the Q4_K tiles on transposed super-blocks on
// repacked weights (dotQ4KTx8RAVX2, dotQ4KTx16RAVX2, dotQ4KTxNRAVX2)
// against the same tiles on the file's rows (checked by TestTileKT) bit
// for bit, every output written by one written by the other, on random
// and saturated blocks, 1 to 9 weight rows per call, 1 to all groups.
func TestTileKTRepacked(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb int
		saturated  bool
	}{{8, 3, 1, false}, {16, 9, 8, false}, {24, 13, 3, false}, {16, 6, 8, true}, {32, 5, 2, false}, {128, 14, 8, false}, {136, 4, 3, true}, {72, 3, 64, false}} {
		t.Run(fmt.Sprintf("n%d/%dx%d/sat=%v", c.n, c.out, c.kb*256, c.saturated), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n)+7, uint64(c.out*c.kb)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q4_K, c.out, in)
			x := randF(r, c.n*in)
			if c.saturated {
				saturateQ4K(data, x)
			}
			rp := make([]byte, len(data))
			quant.RepackQ4K(rp, data)
			var a actQ
			a.quantize(kern{avx2: true}, x, in, c.n, in, 256)
			nb, rb := in/256, kernels.Q4_K.RowBytes(in)
			gs, ss := a.ktStrides()
			oc := c.out + 3
			for _, tile := range []string{"x8", "x16", "xN"} {
				for groups := 1; groups <= c.n/8; groups++ {
					own := gs == 2048*nb
					if (tile == "x8" && (groups != 1 || !own)) || (tile == "x16" && (groups != 2 || !own)) || (tile == "xN" && groups > ktnGroups) {
						continue
					}
					var res [2][]float32
					for v, w := range [][]byte{data, rp} {
						res[v] = make([]float32, c.n*oc)
						for i := range res[v] {
							res[v][i] = float32(math.Inf(-1))
						}
						for ob, blk := 0, 1; ob < c.out; ob, blk = ob+blk, blk+1 {
							oe := min(ob+blk, c.out)
							xt, xd8, bp, o := &a.kt[0], &a.d8[0], &a.bp8(0, nb)[0], &res[v][ob]
							acc := make([]float32, (oe-ob)*groups*16)
							switch {
							case tile == "x8" && v == 0:
								dotQ4KTx8AVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
							case tile == "x8":
								dotQ4KTx8RAVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
							case tile == "x16" && v == 0:
								dotQ4KTx16AVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
							case tile == "x16":
								dotQ4KTx16RAVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc)
							case v == 0:
								dotQ4KTxNAVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc, groups, &acc[0], gs, ss)
							default:
								dotQ4KTxNRAVX2(&w[ob*rb], rb, oe-ob, xt, xd8, bp, nb, o, oc, groups, &acc[0], gs, ss)
							}
						}
					}
					written := 0
					for i := range res[0] {
						if math.Float32bits(res[0][i]) != math.Float32bits(res[1][i]) {
							t.Fatalf("%s, %d groups: output %d = %v on repacked rows, %v on the file's", tile, groups, i, res[1][i], res[0][i])
						}
						if !math.IsInf(float64(res[0][i]), -1) {
							written++
						}
					}
					if written != 8*groups*c.out {
						t.Fatalf("%s, %d groups: %d outputs written, want %d", tile, groups, written, 8*groups*c.out)
					}
				}
			}
		})
	}
}

// BenchmarkTileKTNRepacked compares dotQ4KTxNAVX2 on the file's rows with
// dotQ4KTxNRAVX2 on repacked rows, alternated within each iteration, one
// thread: 64 weight rows of 2048 and 8192 values against 16 and 128
// activation rows (decode of 16 sequences, prefill), ktnRows rows per
// call as rowsKTN makes them. GMAC/cpu-s per variant.
func BenchmarkTileKTNRepacked(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const rows = 64
	for _, in := range []int{2048, 8192} {
		for _, n := range []int{16, 128} {
			b.Run(fmt.Sprintf("k%d/n%d", in, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(16, uint64(in+n)))
				data := randBlocks(r, kernels.Q4_K, rows, in)
				rp := make([]byte, len(data))
				quant.RepackQ4K(rp, data)
				var a actQ
				a.quantize(kern{avx2: true}, randF(r, n*in), in, n, in, 256)
				nb, rb := in/256, kernels.Q4_K.RowBytes(in)
				gs, ss := a.ktStrides()
				res := make([]float32, n*rows)
				var acc [ktnRows * ktnGroups * 16]float32
				run := func(v int) {
					for m := 0; m < n; m += 8 * ktnGroups {
						g := min(ktnGroups, (n-m)/8)
						for r0 := 0; r0 < rows; r0 += ktnRows {
							if v == 0 {
								dotQ4KTxNAVX2(&data[r0*rb], rb, ktnRows, &a.kt[(m/8)*gs], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &res[m*rows+r0], rows, g, &acc[0], gs, ss)
							} else {
								dotQ4KTxNRAVX2(&rp[r0*rb], rb, ktnRows, &a.kt[(m/8)*gs], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &res[m*rows+r0], rows, g, &acc[0], gs, ss)
							}
						}
					}
				}
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for j := 0; j < 2; j++ {
						v := (i + j) % 2
						c0 := processCPU()
						run(v)
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"file", "repacked"} {
					if cpu[v] > 0 {
						b.ReportMetric(float64(rows*n*in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
					}
				}
			})
		}
	}
}

// TestRepackedMatMul checks MatMul on a Q4_K weight repacked by
// PrepareMatMul against MatMul on the file's bytes, bit for bit, for batch
// sizes that take every path (rows1; rowsEach at 2–3; the ×4 tile and
// single rows left over; the transposed tiles in pairs, singles and
// dotQ4KTxNRAVX2 at 8–137 rows), 1 and 2 threads, odd weight row counts,
// and that the embedding (keepRows) and weights without AVX2 stay as the
// file has them; RowF32 decodes a repacked row as the file's.
func TestRepackedMatMul(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 49))
	for _, c := range []struct{ out, kb int }{{37, 1}, {64, 8}, {21, 16}, {130, 2}} {
		in := c.kb * 256
		data := randBlocks(r, kernels.Q4_K, c.out, in)
		for _, threads := range []int{1, 2, -1} {
			// (-1: 2 threads with the AVX2 tiles where the VNNI ones,
			// k4v.go, would run)
			b := New(Options{Threads: max(threads, 2), QuantizeActivations: true})
			if threads < 0 {
				if !b.k.k4v {
					b.Close()
					continue
				}
				b.k.k4v = false
			}
			file, err := kernels.NewHostWeight(kernels.Q4_K, c.out, in, bytes.Clone(data))
			if err != nil {
				t.Fatal(err)
			}
			rp, _ := kernels.NewHostWeight(kernels.Q4_K, c.out, in, bytes.Clone(data))
			if err := b.PrepareMatMul(rp, false); err != nil || !rp.Repacked || bytes.Equal(rp.Q, data) || len(rp.Q) != len(data) {
				t.Fatalf("%dx%d: PrepareMatMul did not repack (err %v)", c.out, in, err)
			}
			kept, _ := kernels.NewHostWeight(kernels.Q4_K, c.out, in, bytes.Clone(data))
			if err := b.PrepareMatMul(kept, true); err != nil || kept.Repacked || !bytes.Equal(kept.Q, data) {
				t.Fatalf("%dx%d: PrepareMatMul repacked a weight read as rows", c.out, in)
			}
			row, want := make([]float32, in), make([]float32, in)
			for _, o := range []int{0, c.out - 1} {
				rp.RowF32(row, o)
				file.RowF32(want, o)
				if !slices.Equal(row, want) {
					t.Fatalf("%dx%d: RowF32(%d) of the repacked weight differs", c.out, in, o)
				}
			}
			for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 31, 32, 40, 137} {
				x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
				want := b.Alloc(n, c.out).(*kernels.Host)
				got := b.Alloc(n, c.out).(*kernels.Host)
				b.MatMul(want, x, file, n)
				b.MatMul(got, x, rp, n)
				for i := range want.F[:n*c.out] {
					if math.Float32bits(got.F[i]) != math.Float32bits(want.F[i]) {
						t.Fatalf("%dx%d, %d rows, %d threads: out[%d] = %v repacked, %v from the file's bytes", c.out, in, n, threads, i, got.F[i], want.F[i])
					}
				}
			}
			b.Close()
		}
	}
	plain := New(Options{Threads: 1, Plain: true, QuantizeActivations: true})
	defer plain.Close()
	w, _ := kernels.NewHostWeight(kernels.Q4_K, 8, 256, randBlocks(r, kernels.Q4_K, 8, 256))
	if err := plain.PrepareMatMul(w, false); err != nil || w.Repacked {
		t.Fatal("the plain backend repacked a Q4_K weight")
	}
}

// TestRepackedShared checks MatMulShared with repacked Q4_K weights (q and
// k) beside a Q6_K one (v) against MatMul on the file's bytes bit for bit,
// and that a decode-sized call allocates nothing.
func TestRepackedShared(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(3, 4))
	const in = 2048
	b := New(Options{Threads: 2, QuantizeActivations: true})
	defer b.Close()
	rows := []int{257, 64, 65}
	dts := []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q6_K}
	var files, ws, outs, wants []kernels.Tensor
	for i, n := range rows {
		data := randBlocks(r, dts[i], n, in)
		f, _ := kernels.NewHostWeight(dts[i], n, in, bytes.Clone(data))
		w, _ := kernels.NewHostWeight(dts[i], n, in, bytes.Clone(data))
		if err := b.PrepareMatMul(w, false); err != nil || w.Repacked != (dts[i] == kernels.Q4_K) {
			t.Fatalf("weight %d: Repacked %v (err %v)", i, w.Repacked, err)
		}
		files, ws = append(files, f), append(ws, w)
		outs = append(outs, &kernels.Host{R: 1, C: n, DT: kernels.F32, F: make([]float32, n)})
		wants = append(wants, &kernels.Host{R: 1, C: n, DT: kernels.F32, F: make([]float32, n)})
	}
	x := &kernels.Host{R: 1, C: in, DT: kernels.F32, F: randF(r, in)}
	b.MatMulShared(outs, x, ws, 1)
	for i := range files {
		b.MatMul(wants[i], x, files[i], 1)
		if g, w := outs[i].(*kernels.Host).F, wants[i].(*kernels.Host).F; !slices.Equal(g, w) {
			t.Fatalf("weight %d: MatMulShared on repacked rows differs from MatMul on the file's", i)
		}
	}
	allocs := testing.AllocsPerRun(50, func() {
		x.F[0]++ // a new activation row: quantized and permuted again
		b.MatMulShared(outs, x, ws, 1)
		b.MatMul(outs[0], x, ws[0], 1)
	})
	if allocs != 0 {
		t.Errorf("repacked batch-1 products allocate %v times per call", allocs)
	}
}

// TestRepackThreads checks that PrepareMatMul's repack, split across 1–5
// threads (repackTask), with and without prefault, writes what one serial quant.RepackQ4K writes, for
// weights just under, at and over repackMinPar blocks and ragged splits.
func TestRepackThreads(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 53))
	for _, c := range []struct{ out, kb int }{{1, 1}, {97, 1}, {repackMinPar - 1, 1}, {repackMinPar, 1}, {repackMinPar + 1, 1}, {97, 8}, {1031, 3}, {repackStep + 1, 1}, {1000, 32}} {
		in := c.kb * 256
		data := randBlocks(r, kernels.Q4_K, c.out, in)
		want := make([]byte, len(data))
		quant.RepackQ4K(want, data)
		for _, threads := range []int{1, 2, 3, 5, -2} {
			// (-2: 2 threads, the copy's pages faulted in one by one)
			b := New(Options{Threads: max(threads, 2)})
			b.noPrefault = threads < 0
			w, err := kernels.NewHostWeight(kernels.Q4_K, c.out, in, bytes.Clone(data))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PrepareMatMul(w, false); err != nil || !w.Repacked {
				t.Fatalf("%dx%d, %d threads: PrepareMatMul did not repack (err %v)", c.out, in, threads, err)
			}
			if !bytes.Equal(w.Q, want) {
				t.Fatalf("%dx%d, %d threads: the repacked copy differs from a serial RepackQ4K", c.out, in, threads)
			}
			b.Close()
		}
	}
}

// BenchmarkRepackPrefault repacks a 14 MB Q4_K weight on 2 threads into
// fresh pages (the heap returned to the OS before each call), with and
// without prefault, and reports the process's CPU seconds per GB (user +
// system: the page faults are system time).
func BenchmarkRepackPrefault(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const out, in = 8192, 3072
	data := randBlocks(rand.New(rand.NewPCG(1, 2)), kernels.Q4_K, out, in)
	for _, pf := range []bool{true, false} {
		b.Run(fmt.Sprintf("prefault=%v", pf), func(b *testing.B) {
			be := New(Options{Threads: 2})
			defer be.Close()
			be.noPrefault = !pf
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				debug.FreeOSMemory()
				w, _ := kernels.NewHostWeight(kernels.Q4_K, out, in, data)
				c0 := processCPU()
				b.StartTimer()
				if err := be.PrepareMatMul(w, false); err != nil || !w.Repacked {
					b.Fatal("no repack")
				}
				cpu += processCPU() - c0
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(len(data))/1e9), "cpu-s/GB")
		})
	}
}
