package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// checkK4V runs the VNNI tiles (dotQ4KTx8VNNI, dotQ4KTx16VNNI,
// dotQ4KTxNVNNI) on the repacked rows of data against the AVX2 tiles on
// the same rows (dotQ4KTx8RAVX2, …; checked against the file's layout by
// TestTileKTRepacked) for n activation rows x: bit for bit, every output
// of the tile written and nothing else, 1 to 9 weight rows per call, 1 to
// all groups; and one output per weight row against the plain Go dot
// product (dotQ4KGo) within the float32 rounding of its terms.
func checkK4V(t *testing.T, data []byte, x []float32, n, out, in int) {
	t.Helper()
	rp := make([]byte, len(data))
	quant.RepackQ4K(rp, data)
	var a actQ
	a.quantize(kern{avx2: true, k4v: true}, x, in, n, in, 256)
	if len(a.kv) != len(a.kt) || len(a.kv) == 0 {
		t.Fatalf("n %d, %d values: %d bytes in kv, %d in kt", n, in, len(a.kv), len(a.kt))
	}
	nb, rb := in/256, kernels.Q4_K.RowBytes(in)
	gs, ss := a.ktStrides()
	oc := out + 3
	for _, tile := range []string{"x8", "x16", "xN"} {
		for groups := 1; groups <= n/8; groups++ {
			own := gs == 2048*nb
			if (tile == "x8" && (groups != 1 || !own)) || (tile == "x16" && (groups != 2 || !own)) || (tile == "xN" && groups > ktnGroups) {
				continue
			}
			var res [2][]float32
			for v := range res {
				res[v] = make([]float32, n*oc)
				for i := range res[v] {
					res[v][i] = float32(math.Inf(-1))
				}
				xt := &a.kt[0]
				if v == 1 {
					xt = &a.kv[0]
				}
				for ob, blk := 0, 1; ob < out; ob, blk = ob+blk, blk+1 {
					oe := min(ob+blk, out)
					w, xd8, bp, o := &rp[ob*rb], &a.d8[0], &a.bp8(0, nb)[0], &res[v][ob]
					acc := make([]float32, (oe-ob)*groups*16)
					switch {
					case tile == "x8" && v == 0:
						dotQ4KTx8RAVX2(w, rb, oe-ob, xt, xd8, bp, nb, o, oc)
					case tile == "x8":
						dotQ4KTx8VNNI(w, rb, oe-ob, xt, xd8, bp, nb, o, oc)
					case tile == "x16" && v == 0:
						dotQ4KTx16RAVX2(w, rb, oe-ob, xt, xd8, bp, nb, o, oc)
					case tile == "x16":
						dotQ4KTx16VNNI(w, rb, oe-ob, xt, xd8, bp, nb, o, oc)
					case v == 0:
						dotQ4KTxNRAVX2(w, rb, oe-ob, xt, xd8, bp, nb, o, oc, groups, &acc[0], gs, ss)
					default:
						dotQ4KTxNVNNI(w, rb, oe-ob, xt, xd8, bp, nb, o, oc, groups, &acc[0], gs, ss)
					}
				}
			}
			written := 0
			for i := range res[0] {
				if math.Float32bits(res[0][i]) != math.Float32bits(res[1][i]) {
					t.Fatalf("%s, %d groups: output %d (row %d, weight row %d) = %v with VNNI, %v with AVX2", tile, groups, i, i/oc, i%oc, res[1][i], res[0][i])
				}
				if !math.IsInf(float64(res[0][i]), -1) {
					written++
				}
			}
			if written != 8*groups*out {
				t.Fatalf("%s, %d groups: %d outputs written, want %d", tile, groups, written, 8*groups*out)
			}
			for o := 0; o < out; o++ {
				m := (o * 5) % (8 * groups)
				ref := dotQ4KGo(data[o*rb:(o+1)*rb], a.q[m*in:(m+1)*in], a.d[m*nb:(m+1)*nb], a.bs[m*in/16:(m+1)*in/16])
				tol := max(1e-4*max(1, math.Abs(float64(ref))), float64(nb+16)*0x1p-23*magQ4K(data[o*rb:(o+1)*rb], a.q[m*in:(m+1)*in], a.d[m*nb:(m+1)*nb]))
				if got := res[1][m*oc+o]; !(math.Abs(float64(got-ref)) <= tol) {
					t.Fatalf("%s, %d groups: row %d, weight row %d = %v, plain Go %v", tile, groups, m, o, got, ref)
				}
			}
		}
	}
}

// TestK4V checks the VNNI Q4_K tiles (checkK4V) on random, saturated
// (every nibble 15, activations ±127 alternating) and negative-saturated
// (activations all −127: every lane at −16·15·127) blocks, for rows of 1
// to 64 super-blocks, 8 to 136 activation rows (both layouts of actQ.kt)
// and 1 to 14 weight rows.
func TestK4V(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb int
		fill       string
	}{{8, 3, 1, "rand"}, {16, 9, 8, "rand"}, {24, 13, 3, "rand"}, {16, 6, 8, "sat"}, {16, 5, 2, "neg"},
		{32, 5, 2, "rand"}, {128, 14, 8, "rand"}, {136, 4, 3, "sat"}, {40, 7, 16, "neg"}, {72, 3, 64, "rand"}, {8, 1, 97, "rand"}} {
		t.Run(fmt.Sprintf("n%d/%dx%d/%s", c.n, c.out, c.kb*256, c.fill), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n)+11, uint64(c.out*c.kb)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q4_K, c.out, in)
			x := randF(r, c.n*in)
			switch c.fill {
			case "sat":
				saturateQ4K(data, x)
			case "neg":
				saturateQ4K(data, x)
				for i := range x {
					x[i] = -1
				}
			}
			checkK4V(t, data, x, c.n, c.out, in)
		})
	}
}

// TestK4VActWords checks that k4vActWords is a permutation of a
// super-block's 128 words.
func TestK4VActWords(t *testing.T) {
	var seen [128]bool
	for _, p := range k4vActWords() {
		if seen[p] {
			t.Fatalf("word %d taken twice", p)
		}
		seen[p] = true
	}
}

// FuzzK4V checks the VNNI Q4_K tiles (checkK4V) on weights made from the
// fuzzer's bytes (d and dmin kept finite), 8 to 40 activation rows, 1 to
// 12 weight rows of 1 to 6 super-blocks.
func FuzzK4V(f *testing.F) {
	if !hasK4V {
		f.Skip("no AVX512_VNNI/VBMI on this machine or build")
	}
	f.Add(uint8(7), uint8(3), uint8(1), []byte{1, 2, 3})
	f.Add(uint8(98), uint8(11), uint8(4), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(0), uint8(0), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, out8, nb8, g8 uint8, seed []byte) {
		out, nb, n := int(out8%12)+1, int(nb8%6)+1, 8*(int(g8%5)+1)
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(out*nb*n)))
		data := randBlocks(r, kernels.Q4_K, out, nb*256)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		// d and dmin: finite halves of at most 1 in magnitude
		for o := 0; o < len(data); o += 144 {
			data[o+1] &= 0xbb
			data[o+3] &= 0xbb
		}
		checkK4V(t, data, randF(r, n*nb*256), n, out, nb*256)
	})
}

// TestK4VShared checks MatMulShared at 16 and 128 activation rows with
// repacked Q4_K weights (the VNNI tiles where they run) beside a Q6_K one
// (sharing actQ.kt) against MatMul on the file's bytes, bit for bit, and
// that a call allocates nothing once the buffers have grown.
func TestK4VShared(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const in = 2048
	b := New(Options{Threads: 2, QuantizeActivations: true})
	defer b.Close()
	outRows := []int{67, 64, 65}
	dts := []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q6_K}
	for _, n := range []int{16, 128} {
		var files, ws, outs, wants []kernels.Tensor
		for i, o := range outRows {
			data := randBlocks(r, dts[i], o, in)
			f, _ := kernels.NewHostWeight(dts[i], o, in, bytes.Clone(data))
			w, _ := kernels.NewHostWeight(dts[i], o, in, bytes.Clone(data))
			if err := b.PrepareMatMul(w, false); err != nil || w.Repacked != (dts[i] == kernels.Q4_K) {
				t.Fatalf("weight %d: Repacked %v (err %v)", i, w.Repacked, err)
			}
			files, ws = append(files, f), append(ws, w)
			outs = append(outs, &kernels.Host{R: n, C: o, DT: kernels.F32, F: make([]float32, n*o)})
			wants = append(wants, &kernels.Host{R: n, C: o, DT: kernels.F32, F: make([]float32, n*o)})
		}
		x := &kernels.Host{R: n, C: in, DT: kernels.F32, F: randF(r, n*in)}
		b.MatMulShared(outs, x, ws, n)
		for i := range files {
			b.MatMul(wants[i], x, files[i], n)
			if g, w := outs[i].(*kernels.Host).F, wants[i].(*kernels.Host).F; !slices.Equal(g, w) {
				t.Fatalf("%d rows, weight %d: MatMulShared on repacked rows differs from MatMul on the file's", n, i)
			}
		}
		allocs := testing.AllocsPerRun(20, func() {
			x.F[0]++ // new activation rows: quantized and transposed again
			b.MatMulShared(outs, x, ws, n)
		})
		if allocs != 0 {
			t.Errorf("%d rows: repacked products allocate %v times per call", n, allocs)
		}
	}
}

// BenchmarkK4V compares the AVX2 Q4_K tiles on repacked weights with the
// VNNI ones, alternated within each iteration, one thread: rows of 2048
// and 8192 values against 16 activation rows (decode of 16 sequences: the
// ×16 tile at 2048, the ×N tile at 8192, as qTiles picks) and 128
// (prefill: the ×N tile), ktnRows weight rows per call; 64 weight rows
// (in L2), and at 16 rows also streamBytes of them per variant (from
// memory: each variant reads its own copy). GMAC/cpu-s per variant.
func BenchmarkK4V(b *testing.B) {
	if !hasK4V {
		b.Skip("no AVX512_VNNI/VBMI on this machine or build")
	}
	for _, in := range []int{2048, 8192} {
		rb := kernels.Q4_K.RowBytes(in)
		for _, c := range []struct {
			n, rows int
			place   string
		}{{16, 64, "L2"}, {128, 64, "L2"}, {16, streamBytes / rb / ktnRows * ktnRows, "mem"}} {
			b.Run(fmt.Sprintf("k%d/n%d/%s", in, c.n, c.place), func(b *testing.B) {
				n, rows := c.n, c.rows
				r := rand.New(rand.NewPCG(16, uint64(in+n)))
				data := randBlocks(r, kernels.Q4_K, rows, in)
				rp := [2][]byte{make([]byte, len(data)), nil}
				quant.RepackQ4K(rp[0], data)
				rp[1] = rp[0]
				if c.place == "mem" {
					rp[1] = bytes.Clone(rp[0])
				}
				var a actQ
				a.quantize(kern{avx2: true, k4v: true}, randF(r, n*in), in, n, in, 256)
				nb := in / 256
				gs, ss := a.ktStrides()
				res := make([]float32, n*rows)
				var acc [ktnRows * ktnGroups * 16]float32
				run := func(v int) {
					xs, w := [2][]int8{a.kt, a.kv}[v], rp[v]
					if gs == 2048*nb && n == 16 {
						for r0 := 0; r0 < rows; r0 += ktnRows {
							if v == 0 {
								dotQ4KTx16RAVX2(&w[r0*rb], rb, ktnRows, &xs[0], &a.d8[0], &a.bp[0], nb, &res[r0], rows)
							} else {
								dotQ4KTx16VNNI(&w[r0*rb], rb, ktnRows, &xs[0], &a.d8[0], &a.bp[0], nb, &res[r0], rows)
							}
						}
						return
					}
					for m := 0; m < n; m += 8 * ktnGroups {
						g := min(ktnGroups, (n-m)/8)
						for r0 := 0; r0 < rows; r0 += ktnRows {
							if v == 0 {
								dotQ4KTxNRAVX2(&w[r0*rb], rb, ktnRows, &xs[(m/8)*gs], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &res[m*rows+r0], rows, g, &acc[0], gs, ss)
							} else {
								dotQ4KTxNVNNI(&w[r0*rb], rb, ktnRows, &xs[(m/8)*gs], &a.d8[(m/8)*nb*16], &a.bp8(m, nb)[0], nb, &res[m*rows+r0], rows, g, &acc[0], gs, ss)
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
				for v, name := range []string{"avx2", "vnni"} {
					if cpu[v] > 0 {
						b.ReportMetric(float64(rows*n*in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
						b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
					}
				}
			})
		}
	}
}

// TestTransposeKV checks transposeKVAVX512 against transposeKVGo for
// 8 to 136 rows (both layouts of ktStrides) and 1 to 32 super-blocks,
// every byte of kv, and that rows past the last group of 8 are left out.
func TestTransposeKV(t *testing.T) {
	if !hasK4V {
		t.Skip("no AVX512_VNNI/VBMI on this machine or build")
	}
	for _, c := range []struct{ n, kb int }{{8, 1}, {9, 3}, {16, 8}, {23, 2}, {32, 8}, {136, 3}, {16, 32}} {
		r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.kb)))
		in := 256 * c.kb
		var a actQ
		a.quantize(kern{avx2: true, k4v: true}, randF(r, c.n*in), in, c.n, in, 256)
		got := bytes.Clone(f8Bytes(a.kv))
		for i := range a.kv {
			a.kv[i] = 0x55
		}
		gs, ss := a.ktStrides()
		a.transposeKVGo(in/256, gs, ss)
		if want := f8Bytes(a.kv); !bytes.Equal(got, want) || len(want) != c.n/8*8*in {
			t.Fatalf("%d rows × %d values: kv differs from transposeKVGo's (%d bytes, want %d)", c.n, in, len(got), c.n/8*8*in)
		}
	}
}

// f8Bytes views int8s as bytes.
func f8Bytes(q []int8) []byte {
	b := make([]byte, len(q))
	for i, v := range q {
		b[i] = byte(v)
	}
	return b
}
