package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// mxVNNIWeights returns rows MXFP4 rows of nb blocks of the given kind:
// random codes and scales, saturated blocks (every code ±12, the largest
// |dword|), extreme scale bytes (0, 1, 254 and the NaN byte 255) or a mix.
func mxVNNIWeights(r *rand.Rand, kind string, rows, nb int) []byte {
	data := randMXFP4(r, rows, nb*32, 118, 18)
	for b := 0; b < len(data); b += quant.MXFP4BlockBytes {
		blk := data[b : b+quant.MXFP4BlockBytes]
		switch kind {
		case "saturated":
			c := byte(0x77) // +12 in both nibbles
			if r.IntN(2) == 0 {
				c = 0xff // −12
			}
			for j := 1; j < len(blk); j++ {
				blk[j] = c
			}
		case "scales":
			blk[0] = []byte{0, 1, 127, 254, 255}[r.IntN(5)]
		}
	}
	return data
}

// mxVNNIActs returns n activation rows of k values of the given kind:
// random, or saturated (±1 per block, so every quantized value is ±127).
func mxVNNIActs(r *rand.Rand, kind string, n, k int) []float32 {
	x := randF(r, n*k)
	if kind == "saturated" {
		for i := range x {
			x[i] = 1
			if (i/32)%2 == 1 {
				x[i] = -1
			}
		}
	}
	return x
}

// sentinelF marks outputs a kernel must not write.
const sentinelF = -7.5

// TestMXFP4VNNI checks the AVX-512 VNNI MXFP4 kernels (mxvnni_amd64.s)
// against the AVX2 kernels they replace, bit for bit: the batch-1 row loop
// for 1 to 13 weight rows (groups of four and the rows left over) against
// the AVX2 table loop, and the tiles for 1 to 9 activation rows (tiles of
// 4, of 2 and 3 left over, a single row left over through the VNNI row
// loop), 33 and mxTabRows+2 (prefill, which the AVX2 path runs without
// tables) and weight-row ranges with odd counts and offsets (an odd row
// through the AVX2 tile) against the AVX2 table tiles, for 1, 2, 3, 5 and
// 90 blocks, on random, saturated (every code ±12 and every activation
// ±127) and extreme-scale blocks (scale bytes 0, 1, 254 and NaN's 255);
// outputs outside the range are not written.
func TestMXFP4VNNI(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI on this machine or build")
	}
	avx2, vnni := kern{avx2: true}, kern{avx2: true, simd: true, vnni: true}
	r := rand.New(rand.NewPCG(20, 51))
	for _, kind := range []string{"random", "saturated", "scales"} {
		for _, nb := range []int{1, 2, 3, 5, 90} {
			t.Run(fmt.Sprintf("%s/nb%d", kind, nb), func(t *testing.T) {
				in := nb * 32
				const maxRows = 13
				data := mxVNNIWeights(r, kind, maxRows, nb)
				x := mxVNNIActs(r, kind, 130, in)
				var a1 actQ
				a1.quantize(kern{}, x[:in], in, 1, in, 32)
				a1.mxfp4Corr(1, 1) // the AVX2 loop's tables
				a1.mxfp4Corr32()
				for rows := 1; rows <= maxRows; rows++ {
					want := make([]float32, rows)
					mxfp4Rows(avx2, data, &a1, nb, rows, want)
					got := make([]float32, rows+1)
					got[rows] = sentinelF
					mxfp4Rows(vnni, data, &a1, nb, rows, got[:rows])
					for o := range rows {
						if !sameF32(got[o], want[o]) {
							t.Errorf("rows=%d row %d: vnni %v, avx2 %v", rows, o, got[o], want[o])
						}
					}
					if got[rows] != sentinelF {
						t.Errorf("rows=%d: wrote past the rows", rows)
					}
				}
				w := &kernels.Host{R: maxRows, C: in, DT: kernels.MXFP4, Q: data}
				for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 33, mxTabRows + 2} {
					for _, rg := range [][2]int{{0, 1}, {0, 2}, {0, 5}, {1, 8}, {2, 9}, {0, 12}, {1, 13}} {
						outs := [2]*kernels.Host{}
						for i, k := range []kern{avx2, vnni} {
							out := &kernels.Host{R: n, C: maxRows, F: make([]float32, n*maxRows)}
							for j := range out.F {
								out.F[j] = sentinelF
							}
							task := qmatTask{k: k, out: out, x: &kernels.Host{R: n, C: in, F: x[:n*in]}, w: w, n: n}
							task.act.quantize(k, x[:n*in], in, n, in, 32)
							task.act.mxfp4Prep(k, 1, 1)
							if task.act.mxsOK != (!k.vnni && n <= mxTabRows) {
								t.Fatalf("n=%d vnni=%v: scale tables %v", n, k.vnni, task.act.mxsOK)
							}
							task.run(rg[0], rg[1], 0)
							outs[i] = out
						}
						for m := range n {
							for o := range maxRows {
								g, w := outs[1].F[m*maxRows+o], outs[0].F[m*maxRows+o]
								if o < rg[0] || o >= rg[1] {
									if g != sentinelF {
										t.Errorf("n=%d rows [%d,%d): out[%d,%d] written (%v)", n, rg[0], rg[1], m, o, g)
									}
									continue
								}
								if !sameF32(g, w) {
									t.Errorf("n=%d rows [%d,%d) act %d row %d: vnni %v, avx2 %v", n, rg[0], rg[1], m, o, g, w)
								}
							}
						}
					}
				}
			})
		}
	}
}

// TestMXFP4VNNIMatMul checks MatMul on a backend with the VNNI kernels
// against one on the AVX2 kernels (vnni cleared), bit for bit, for
// decode batches of 1 to 6 rows at gpt-oss's 2880 columns.
func TestMXFP4VNNIMatMul(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 52))
	const out, in = 70, 2880
	data := randMXFP4(r, out, in, 118, 18)
	w := &kernels.Host{R: out, C: in, DT: kernels.MXFP4, Q: data}
	bv := New(Options{Threads: 2, QuantizeActivations: true})
	defer bv.Close()
	ba := New(Options{Threads: 2, QuantizeActivations: true})
	defer ba.Close()
	ba.k.vnni = false
	if !bv.k.vnni {
		t.Fatal("the default backend does not take the VNNI kernels")
	}
	for n := 1; n <= 6; n++ {
		x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
		gv := &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
		ga := &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
		bv.MatMul(gv, x, w, n)
		ba.MatMul(ga, x, w, n)
		for i := range gv.F {
			if !sameF32(gv.F[i], ga.F[i]) {
				t.Fatalf("n=%d out[%d]: vnni %v, avx2 %v", n, i, gv.F[i], ga.F[i])
			}
		}
	}
}

// FuzzMXFP4VNNI checks the VNNI row loop and tiles against the AVX2
// kernels, bit for bit, on arbitrary weight bytes (any codes and scale
// bytes) and activations.
func FuzzMXFP4VNNI(f *testing.F) {
	f.Add([]byte{0x7f, 0x77, 0xff, 0x12}, int64(1), uint8(3))
	f.Add([]byte{0, 0, 0}, int64(7), uint8(9))
	f.Fuzz(func(t *testing.T, seed []byte, xs int64, shape uint8) {
		if !hasVNNI {
			t.Skip("no AVX-512 VNNI on this machine or build")
		}
		nb, rows := 1+int(shape%4), 1+int(shape/4%9)
		in, rb := nb*32, nb*quant.MXFP4BlockBytes
		data := make([]byte, rows*rb)
		for i := range data {
			if len(seed) > 0 {
				data[i] = seed[i%len(seed)] ^ byte(i*37)
			}
		}
		r := rand.New(rand.NewPCG(uint64(xs), 53))
		x := randF(r, 4*in)
		var a actQ
		a.quantize(kern{}, x, in, 4, in, 32)
		a.mxfp4Corr(1, 1)
		a.mxfp4Corr32()
		avx2, vnni := kern{avx2: true}, kern{avx2: true, simd: true, vnni: true}
		if pairs := rows / 2; pairs > 0 {
			for R := 2; R <= 4; R++ {
				want := make([]float32, R*rows)
				got := make([]float32, R*rows)
				mxfp4TabTile(data, rb, &a, 4-R, R, rows, want, rows)
				mxfp4TileVNNI(data, rb, &a, 4-R, R, pairs, got, rows)
				for i := range got {
					if i%rows < 2*pairs && !sameF32(got[i], want[i]) {
						t.Fatalf("R=%d out[%d]: vnni %v, avx2 %v", R, i, got[i], want[i])
					}
				}
			}
		}
		var a1 actQ
		a1.quantize(kern{}, x[:in], in, 1, in, 32)
		a1.mxfp4Corr(1, 1)
		a1.mxfp4Corr32()
		want := make([]float32, rows)
		got := make([]float32, rows)
		mxfp4Rows(avx2, data, &a1, nb, rows, want)
		mxfp4Rows(vnni, data, &a1, nb, rows, got)
		for i := range got {
			if !sameF32(got[i], want[i]) {
				t.Fatalf("rows out[%d]: vnni %v, avx2 %v", i, got[i], want[i])
			}
		}
	})
}

// TestMXFP4CorrAVX2 checks the AVX2 correction kernels against the Go
// formulas, −12·(x[2i]+x[2i+1]) and −12·(x[4i]+…+x[4i+3]), for 32 to 320
// values including the extremes ±127 and −128, and that they write
// nothing past n.
func TestMXFP4CorrAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 54))
	for _, n := range []int{32, 64, 96, 320} {
		for _, kind := range []string{"random", "max", "min"} {
			q := make([]int8, n)
			for i := range q {
				switch kind {
				case "max":
					q[i] = 127
				case "min":
					q[i] = -128
				default:
					q[i] = int8(r.Uint32())
				}
			}
			c16 := make([]int16, n/2+1)
			c32 := make([]int32, n/4+1)
			c16[n/2], c32[n/4] = 77, 77
			mxfp4CorrAVX2(&q[0], n, &c16[0])
			for i := range n / 2 {
				if want := -12 * (int16(q[2*i]) + int16(q[2*i+1])); c16[i] != want {
					t.Fatalf("%s n=%d c16[%d] = %d, want %d", kind, n, i, c16[i], want)
				}
			}
			clear(c16[:n/2])
			mxfp4Corr4AVX2(&q[0], n, &c16[0], &c32[0])
			for i := range n / 4 {
				want := -12 * (int32(q[4*i]) + int32(q[4*i+1]) + int32(q[4*i+2]) + int32(q[4*i+3]))
				if c32[i] != want {
					t.Fatalf("%s n=%d c32[%d] = %d, want %d", kind, n, i, c32[i], want)
				}
				if w16 := -12 * (int16(q[4*i]) + int16(q[4*i+1])); c16[2*i] != w16 {
					t.Fatalf("%s n=%d c16[%d] = %d, want %d", kind, n, 2*i, c16[2*i], w16)
				}
			}
			if c16[n/2] != 77 || c32[n/4] != 77 {
				t.Fatalf("%s n=%d: wrote past n", kind, n)
			}
		}
	}
}
