package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// mxgUsed reports whether a MatMul of n rows on dt weights takes the
// group tiles (mxgroup.go) with the AVX2 kernels on a backend made with
// Options.GroupMXFP4 = grp.
func mxgUsed(dt kernels.DType, n int, grp bool) bool {
	return grp && dt == kernels.MXFP4 && n >= mxgMinRows && hasAVX2
}

// mxgRef is storedRef for the group tiles: the float64 product of the
// decoded weights with the float activations (exact), with the
// group-quantized activations over the blocks the tiles keep (onAct, the
// tiles' result to float32 rounding), the bound of their difference (the
// activation rounding plus the dropped blocks' terms) and a magnitude
// (mag) that bounds the float32 rounding: Σ|w·x|, plus, over the kept
// blocks, (ng+4)·2^-24·Σ (|w|+24·2^(e−128))·|xa| (ng groups). The tiles'
// partial sums hold the offset weights (w + 12·2^(e−128)) and the
// corrections (−12·2^(e−128)·Σxa) apart, each rounded once to float32
// before they cancel, then ng FMAs and a sum of 8 lanes (3 levels); mag
// is scaled so that the callers' 2e-6·mag covers it.
func mxgRef(w *kernels.Host, x []float32, n int) (exact, onAct, bound, mag []float64) {
	K := w.C
	nb := K / 32
	var g mxgAct
	g.quantize(x, n, K)
	for _, s := range []*[]float64{&exact, &onAct, &bound, &mag} {
		*s = make([]float64, n*w.R)
	}
	rb := w.DT.RowBytes(K)
	row := make([]float32, K)
	for o := 0; o < w.R; o++ {
		wr := w.Q[o*rb : (o+1)*rb]
		w.RowF32(row, o)
		for m := 0; m < n; m++ {
			var e, a, b, mg, mo float64
			ng := (nb + mxgBlocks - 1) / mxgBlocks
			for gi := 0; gi < ng; gi++ {
				b0, b1 := gi*mxgBlocks, min(nb, (gi+1)*mxgBlocks)
				d := float64(g.d[gi*n+m])
				emax := 0
				for bl := b0; bl < b1; bl++ {
					emax = max(emax, int(wr[bl*quant.MXFP4BlockBytes]))
				}
				for bl := b0; bl < b1; bl++ {
					e8 := int(wr[bl*quant.MXFP4BlockBytes])
					kept := e8 >= emax-13
					off := 24 * math.Ldexp(1, e8-128) // the offset's and correction's scale
					for j := bl * 32; j < (bl+1)*32; j++ {
						v, xv := float64(row[j]), float64(x[m*K+j])
						xa := float64(g.q[(bl*n+m)*32+j-bl*32]) * d
						e += v * xv
						mg += math.Abs(v * xv)
						if kept {
							a += v * xa
							b += math.Abs(v) * math.Abs(xa-xv)
							mo += (math.Abs(v) + off) * math.Abs(xa)
						} else {
							b += math.Abs(v * xv)
						}
					}
				}
			}
			i := m*w.R + o
			exact[i], onAct[i], bound[i], mag[i] = e, a, b, mg+float64(ng+4)*0x1p-24*1.01*mo/2e-6
		}
	}
	return
}

// mxgDotGo is the plain-Go twin of the group tiles for weight row w
// against activation row r of g's view: the same integers and dropping,
// the group's sum converted and scaled once (the tiles keep 8 partial
// sums: the results agree to float32 rounding).
func mxgDotGo(w []byte, g *mxgAct, r, nb int) float32 {
	var s float32
	ng := (nb + mxgBlocks - 1) / mxgBlocks
	r += g.off
	for gi := 0; gi < ng; gi++ {
		b0, b1 := gi*mxgBlocks, min(nb, (gi+1)*mxgBlocks)
		emax := 0
		for b := b0; b < b1; b++ {
			emax = max(emax, int(w[b*quant.MXFP4BlockBytes]))
		}
		var acc int64
		for b := b0; b < b1; b++ {
			blk := w[b*quant.MXFP4BlockBytes : (b+1)*quant.MXFP4BlockBytes]
			m := int64(mxgPow[int(blk[0])+255-emax])
			xb := g.q[(b*g.n+r)*32 : (b*g.n+r+1)*32]
			var p int64
			for j := 0; j < 16; j++ {
				p += int64(fp4Int[blk[1+j]&0xf]) * int64(xb[j])
				p += int64(fp4Int[blk[1+j]>>4]) * int64(xb[j+16])
			}
			acc += m * p
		}
		s += float32(acc) * (mxgScale[emax] * g.d[gi*g.n+r])
	}
	return s
}

// checkMXG runs the group tiles on weight rows [lo, hi) of data against
// the n rows of x (in values each) and checks every result against the
// float64 references and the Go twin (float32 rounding of the magnitude,
// the dropped blocks' terms for the float activations), and that nothing
// outside the range is written.
func checkMXG(t *testing.T, data []byte, x []float32, n, rows, in, lo, hi int) {
	t.Helper()
	w := &kernels.Host{R: rows, C: in, DT: kernels.MXFP4, Q: data}
	const sentinel = -7.5
	out := &kernels.Host{R: n, C: rows, F: make([]float32, n*rows)}
	for i := range out.F {
		out.F[i] = sentinel
	}
	fast := kern{avx2: true}
	task := qmatTask{k: fast, out: out, x: &kernels.Host{R: n, C: in, F: x}, w: w, n: n}
	task.act.quantize(fast, x, in, n, in, 32)
	task.act.mxfp4Corr(n, max(n, mxgMinRows))
	if !task.act.mxg.ok {
		t.Fatalf("n=%d: no group quantization", n)
	}
	if n >= mxgMinRows {
		task.run(lo, hi, 0)
	} else { // fewer rows: the tiles directly
		task.mxgTiles(lo, hi)
	}
	exact, onAct, bound, mag := mxgRef(w, x, n)
	rb := w.DT.RowBytes(in)
	for m := 0; m < n; m++ {
		for o := 0; o < rows; o++ {
			got := out.F[m*rows+o]
			if o < lo || o >= hi {
				if got != sentinel {
					t.Fatalf("n=%d rows [%d,%d): out[%d,%d] written (%v)", n, lo, hi, m, o, got)
				}
				continue
			}
			i := m*rows + o
			tol := 2e-6*mag[i] + 1e-6
			if d := math.Abs(float64(got) - onAct[i]); !(d <= tol) {
				t.Fatalf("n=%d in=%d act %d row %d: %v, float64 on the group-quantized activations %v (tol %g)", n, in, m, o, got, onAct[i], tol)
			}
			if tw := mxgDotGo(data[o*rb:(o+1)*rb], &task.act.mxg, m, in/32); !(math.Abs(float64(got-tw)) <= tol) {
				t.Fatalf("n=%d in=%d act %d row %d: %v, go twin %v", n, in, m, o, got, tw)
			}
			if d := math.Abs(float64(got) - exact[i]); !(d <= bound[i]*1.0001+tol) {
				t.Fatalf("n=%d in=%d act %d row %d: %v, exact %v: off by more than the bound %g", n, in, m, o, got, exact[i], bound[i])
			}
		}
	}
}

// TestMXFP4GroupTiles checks the group tiles (mxgroup_amd64.s) for tiles
// of 1 to 8 activation rows and more rows than one tile, rows whose
// blocks end in a short group (11, 23 blocks), ragged ranges of weight
// rows (more than a block of mxTabNc), scale bytes spread over 2, 14 (the
// most the multipliers keep) and 40 values (blocks dropped), and
// activation rows with a zero group, an outlier and values at ±127 steps.
func TestMXFP4GroupTiles(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 40))
	for _, nb := range []int{1, 3, 10, 11, 23, 90} {
		in := nb * 32
		for _, span := range []int{2, 14, 40} {
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19} {
				for _, rg := range []struct{ rows, lo, hi int }{{1, 0, 1}, {5, 0, 5}, {9, 2, 8}, {131, 3, 130}} {
					if nb == 90 && rg.rows == 131 && n < 8 {
						continue
					}
					t.Run(fmt.Sprintf("nb%d/e%d/n%d/%d-%d", nb, span, n, rg.lo, rg.hi), func(t *testing.T) {
						data := randMXFP4(r, rg.rows, in, 110, span)
						x := randF(r, n*in)
						if n > 2 {
							clear(x[in : in+min(in, 320)])
							x[2*in+3] = 3e4
							for j := 0; j < in; j++ {
								x[(n-1)*in+j] = float32(j%7-3) * 127
							}
						}
						checkMXG(t, data, x, n, rg.rows, in, rg.lo, rg.hi)
					})
				}
			}
		}
	}
}

// TestMXFP4GroupNaN checks that a scale byte 0xFF (NaN in the OCP format)
// makes its row's results NaN, and the other rows' finite.
func TestMXFP4GroupNaN(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 41))
	const rows, in, n = 4, 640, 9
	data := randMXFP4(r, rows, in, 118, 4)
	rb := kernels.MXFP4.RowBytes(in)
	data[2*rb+11*quant.MXFP4BlockBytes] = 0xff
	x := randF(r, n*in)
	w := &kernels.Host{R: rows, C: in, DT: kernels.MXFP4, Q: data}
	be := New(Options{Threads: 2, QuantizeActivations: true, GroupMXFP4: true})
	defer be.Close()
	out := be.Alloc(n, rows).(*kernels.Host)
	be.MatMul(out, &kernels.Host{R: n, C: in, F: x}, w, n)
	for m := 0; m < n; m++ {
		for o := 0; o < rows; o++ {
			if v := float64(out.F[m*rows+o]); math.IsNaN(v) != (o == 2) {
				t.Fatalf("act %d row %d = %v", m, o, v)
			}
		}
	}
}

// FuzzMXFP4Group checks the group tiles on weight bytes and activation
// rows from the fuzzer (scales kept where the products stay finite)
// against the float64 references.
func FuzzMXFP4Group(f *testing.F) {
	f.Add(uint8(8), uint8(3), uint8(11), []byte{1, 2, 3})
	f.Add(uint8(1), uint8(5), uint8(1), []byte{0xfe, 0x7b, 0, 0x80})
	f.Add(uint8(12), uint8(9), uint8(23), []byte{0x00, 0x88, 0x77, 0x11, 0x0f})
	// found by the fuzzer: a row whose offset terms cancel in the sum
	// (the float32 rounding is relative to them, not to the result)
	f.Add(uint8('C'), uint8(5), uint8(1), []byte("\xfe000"))
	f.Fuzz(func(t *testing.T, n8, rows8, nb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, nb := int(n8%17)+1, int(rows8%70)+1, int(nb8%25)+1
		in := 32 * nb
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randMXFP4(r, rows, in, 100, 40)
		x := randF(r, n*in)
		for i, v := range seed {
			data[i%len(data)] ^= v
			// outliers up to 1e4 (repeated factors would reach float32's
			// range, where the tiles' offset terms, about 3× the
			// products, overflow before the result does: fuzz input
			// f958102dad7107df)
			k := (i * 31) % len(x)
			x[k] = max(-1e4, min(1e4, x[k]*(float32(v)-100)))
		}
		for b := 0; b < len(data); b += quant.MXFP4BlockBytes {
			data[b] = min(data[b], 200) // 2^73 · 12 · 127 · 320 stays finite
		}
		checkMXG(t, data, x, n, rows, in, 0, rows)
	})
}

// TestGroupMXFP4 checks Options.GroupMXFP4: without it (the default) a
// row's MXFP4 product in a batch of 9 rows equals the row's product alone
// bit for bit; with it (the group tiles) the batch's products differ from
// the rows alone (the activations' rounding), within the group
// reference's bound (TestMXFP4GroupTiles).
func TestGroupMXFP4(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 42))
	const rows, in, n = 40, 960, 9
	w, err := kernels.NewHostWeight(kernels.MXFP4, rows, in, randMXFP4(r, rows, in, 118, 6))
	if err != nil {
		t.Fatal(err)
	}
	x := randF(r, n*in)
	for _, grp := range []bool{false, true} {
		inv := !grp
		be := New(Options{Threads: 2, QuantizeActivations: true, GroupMXFP4: grp})
		batch := be.Alloc(n, rows).(*kernels.Host)
		be.MatMul(batch, &kernels.Host{R: n, C: in, F: x}, w, n)
		one := be.Alloc(1, rows).(*kernels.Host)
		same := true
		for m := 0; m < n; m++ {
			be.MatMul(one, &kernels.Host{R: 1, C: in, F: x[m*in : (m+1)*in]}, w, 1)
			for o := 0; o < rows; o++ {
				same = same && math.Float32bits(one.F[o]) == math.Float32bits(batch.F[m*rows+o])
			}
		}
		be.Close()
		if same != inv {
			t.Errorf("GroupMXFP4 %v: batch equals rows alone: %v", grp, same)
		}
	}
}

// TestMXFP4BatchSizes runs MatMul on MXFP4 weights for every batch of 1 to
// 40 rows (the row loop, the table tiles below 8 rows, tiles of 8 and the
// rows left over above; 22 blocks: two groups of 10 and a short one)
// against the float64 references (checkStored: mxgRef for 8 rows and
// more).
func TestMXFP4BatchSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 43))
	const out, in = 29, 22 * 32
	data := randMXFP4(r, out, in, 118, 18)
	for n := 1; n <= 40; n++ {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			checkStored(t, kernels.MXFP4, data, randF(r, n*in), n, out, in, 2)
		})
	}
}

// TestMXFP4GroupAllocs checks that a MatMul through the group tiles
// allocates nothing once the backend's buffers have grown.
func TestMXFP4GroupAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 44))
	const rows, in, n = 70, 640, 12
	w, err := kernels.NewHostWeight(kernels.MXFP4, rows, in, randMXFP4(r, rows, in, 118, 6))
	if err != nil {
		t.Fatal(err)
	}
	be := New(Options{Threads: 2, QuantizeActivations: true, GroupMXFP4: true})
	defer be.Close()
	x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
	out := be.Alloc(n, rows)
	be.MatMul(out, x, w, n)
	if a := testing.AllocsPerRun(20, func() {
		x.F[0]++ // new activations: quantized again
		be.MatMul(out, x, w, n)
	}); a != 0 {
		t.Fatalf("%v allocations per MatMul", a)
	}
}
