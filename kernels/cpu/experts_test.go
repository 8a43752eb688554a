package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// expertCase makes e experts of one type and a routing of n rows to them:
// groups of random sizes, some empty (with a nil weight).
func expertCase(r *rand.Rand, dt kernels.DType, e, n, rows, cols int) (w []kernels.Tensor, start []int32) {
	start = make([]int32, e+1)
	for i := 0; i < n; i++ {
		start[1+r.IntN(e)]++
	}
	for g := 1; g <= e; g++ {
		start[g] += start[g-1]
	}
	for g := 0; g < e; g++ {
		if start[g+1] == start[g] && g%2 == 0 {
			w = append(w, nil)
			continue
		}
		w = append(w, randExpert(r, dt, rows, cols))
	}
	return w, start
}

// randExpert makes one random expert weight of rows × cols.
func randExpert(r *rand.Rand, dt kernels.DType, rows, cols int) kernels.Tensor {
	var data []byte
	if dt == kernels.MXFP4 {
		data = randMXFP4(r, rows, cols, 118, 18)
	} else if dt == kernels.F32 {
		data = make([]byte, 4*rows*cols)
		for i := 0; i < rows*cols; i++ {
			v := math.Float32bits(float32(r.NormFloat64()))
			data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
	} else {
		data = randBlocks(r, dt, rows, cols)
	}
	t, err := kernels.NewHostWeight(dt, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return t
}

// TestMatMulExpertPair checks MatMulExpertPair (gate and up in one op) on
// the CPU and reference backends: bit for bit the two MatMulExperts calls
// it replaces, for each weight type and for decode and batch shapes; and
// that a decode-sized pair allocates nothing.
func TestMatMulExpertPair(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 9))
	for _, dt := range []kernels.DType{kernels.MXFP4, kernels.Q4_K, kernels.F16, kernels.F32} {
		for _, c := range []struct{ e, n, rows, cols int }{
			{1, 1, 8, 256}, {4, 4, 33, 512}, {32, 64, 40, 512}, {4, 64, 24, 256}, {3, 2, 70, 2880 / 256 * 256},
		} {
			t.Run(fmt.Sprintf("%v/e%d_n%d_%dx%d", dt, c.e, c.n, c.rows, c.cols), func(t *testing.T) {
				wA, start := expertCase(r, dt, c.e, c.n, c.rows, c.cols)
				wB := make([]kernels.Tensor, len(wA))
				for g := range wA {
					if wA[g] != nil {
						wB[g] = randExpert(r, dt, c.rows, c.cols)
					}
				}
				x := &kernels.Host{R: c.n, C: c.cols, F: randF(r, c.n*c.cols)}
				for _, be := range []interface {
					kernels.Backend
					kernels.ExpertMatMuler
					kernels.ExpertPairMatMuler
				}{New(Options{Threads: 2, QuantizeActivations: true}), New(Options{Threads: 2}), kernels.NewRef()} {
					gotA, gotB := be.Alloc(c.n, c.rows).(*kernels.Host), be.Alloc(c.n, c.rows).(*kernels.Host)
					be.MatMulExpertPair(gotA, gotB, x, wA, wB, start)
					for _, p := range []struct {
						got *kernels.Host
						w   []kernels.Tensor
					}{{gotA, wA}, {gotB, wB}} {
						want := be.Alloc(c.n, c.rows).(*kernels.Host)
						be.MatMulExperts(want, x, p.w, start)
						for i, v := range want.F {
							if math.Float32bits(p.got.F[i]) != math.Float32bits(v) {
								t.Fatalf("%s: [%d] = %v, MatMulExperts gives %v", be.Name(), i, p.got.F[i], v)
							}
						}
					}
					if c.n == 1 && be.Name() == "cpu" {
						if a := testing.AllocsPerRun(10, func() { be.MatMulExpertPair(gotA, gotB, x, wA, wB, start) }); a != 0 {
							t.Errorf("%v allocations per pair", a)
						}
					}
					be.Close()
				}
			})
		}
	}
}

// TestMatMulExperts checks the CPU backend's MatMulExperts: bit for bit
// what one MatMul per group gives (the same kernels on the same quantized
// activations, now one parallel op), and close to the reference backend's
// float64 product (within the activation-rounding error). Shapes cover one
// row per call (decode), groups of 1 to 16 rows (also in calls of more
// than 16 rows), groups of more than 16 rows (prefill), calls with and
// without MXFP4 scale tables, empty groups and gpt-oss-20b's 2880 width.
func TestMatMulExperts(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 6))
	for _, dt := range []kernels.DType{kernels.MXFP4, kernels.Q4_K, kernels.Q8_0, kernels.Q4_0, kernels.F16, kernels.F32} {
		for _, c := range []struct{ e, n, rows, cols int }{
			{1, 1, 8, 256}, {4, 1, 64, 512}, {4, 4, 33, 256}, {8, 16, 40, 256}, {32, 16, 17, 512}, {4, 64, 24, 256}, {3, 2, 200, 2880 / 32 * 32},
			// groups of more than 16 rows (prefill: MXFP4 scale tables for
			// calls of up to mxTabRows rows) and a call of more than
			// mxTabRows rows (no tables)
			{32, 64, 40, 512}, {8, 40, 66, 2880 / 32 * 32}, {4, 96, 24, 512}, {2, mxTabRows + 8, 20, 256},
		} {
			cols := c.cols
			if dt == kernels.Q4_K {
				cols = cols / 256 * 256
			}
			for _, grp := range []bool{false, true} {
				if grp && dt != kernels.MXFP4 {
					continue
				}
				t.Run(fmt.Sprintf("%v/e%d_n%d_%dx%d/group=%v", dt, c.e, c.n, c.rows, cols, grp), func(t *testing.T) {
					w, start := expertCase(r, dt, c.e, c.n, c.rows, cols)
					x := &kernels.Host{R: c.n, C: cols, F: randF(r, c.n*cols)}
					be := New(Options{Threads: 2, QuantizeActivations: true, GroupMXFP4: grp})
					defer be.Close()
					got := be.Alloc(c.n, c.rows).(*kernels.Host)
					be.MatMulExperts(got, x, w, start)
					maxRows, minRows := 0, c.n
					for g := range w {
						if rows := int(start[g+1] - start[g]); rows > 0 {
							maxRows, minRows = max(maxRows, rows), min(minRows, rows)
						}
					}
					// tables when some group takes mxfp4.go's tiles (not
					// with the VNNI kernels, which make no tables), the
					// group quantization when some group takes the group tiles
					if tabs := be.ex.act.mxsOK; dt == kernels.MXFP4 && hasAVX2 && tabs != (!be.k.vnni && c.n <= mxTabRows && (!grp || minRows < mxgMinRows)) {
						t.Fatalf("scale tables %v with %d rows in groups of up to %d", tabs, c.n, maxRows)
					}
					want := be.Alloc(c.n, c.rows).(*kernels.Host)
					ref := kernels.NewRef().Alloc(c.n, c.rows).(*kernels.Host)
					kernels.NewRef().MatMulExperts(ref, x, w, start)
					for g, wt := range w {
						lo, hi := int(start[g]), int(start[g+1])
						if hi == lo {
							continue
						}
						be.MatMul(kernels.HostRows(want, lo, hi), kernels.HostRows(x, lo, hi), wt, hi-lo)
						// the float64 product on the activations the kernels
						// multiply (quantized ones for the block types), and
						// on the float activations (the reference backend)
						exact, onAct, _, mag := storedRef(wt.(*kernels.Host), x.F[lo*cols:hi*cols], hi-lo)
						if mxgUsed(dt, hi-lo, grp) {
							exact, onAct, _, mag = mxgRef(wt.(*kernels.Host), x.F[lo*cols:hi*cols], hi-lo)
						}
						for m := lo; m < hi; m++ {
							for o := 0; o < c.rows; o++ {
								i, j := m*c.rows+o, (m-lo)*c.rows+o
								if math.Float32bits(got.F[i]) != math.Float32bits(want.F[i]) {
									t.Fatalf("[%d,%d] = %v, one MatMul per group gives %v", m, o, got.F[i], want.F[i])
								}
								if d := math.Abs(float64(got.F[i]) - onAct[j]); d > 2e-6*mag[j]+1e-6 && !(dt == kernels.Q8_0 && hasAVX512) {
									t.Fatalf("[%d,%d] = %v, float64 product %v", m, o, got.F[i], onAct[j])
								}
								if d := math.Abs(float64(ref.F[i]) - exact[j]); d > 2e-6*mag[j]+1e-6 {
									t.Fatalf("reference backend [%d,%d] = %v, float64 product %v", m, o, ref.F[i], exact[j])
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestMatMulExpertsQ8Z checks MatMulExperts on Q8_0 and Q4_0 experts with
// the 4×16 VNNI tiles (kern.q8z: groups of 16 rows and more, and the rows
// past them on the ×8 tiles) against the transposed ×8 VNNI tiles (q8z
// off) and the AVX2 tiles, bit for bit: groups of 1–80 rows, expert row
// counts that are and are not multiples of 4 (zOnly), padded groups, and a
// pair (gate and up in one op).
func TestMatMulExpertsQ8Z(t *testing.T) {
	if !hasVNNI || !hasAVX2 {
		t.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 16))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, c := range []struct{ e, n, rows, cols int }{
			{2, 32, 64, 256}, {4, 96, 36, 512}, {3, 80, 30, 256}, {8, 160, 40, 384}, {1, 48, 16, 2048}, {2, 33, 24, 128},
		} {
			t.Run(fmt.Sprintf("%v/e%d_n%d_%dx%d", dt, c.e, c.n, c.rows, c.cols), func(t *testing.T) {
				w, start := expertCase(r, dt, c.e, c.n, c.rows, c.cols)
				wB, _ := expertCase(r, dt, c.e, c.n, c.rows, c.cols)
				for g := range wB { // wB's experts where w has one
					if w[g] == nil {
						wB[g] = nil
					}
				}
				x := &kernels.Host{R: c.n, C: c.cols, F: randF(r, c.n*c.cols)}
				var outs [3][2]*kernels.Host
				for v, set := range []func(*Backend){
					func(b *Backend) {},                                   // q8z
					func(b *Backend) { b.k.q8z = false },                  // transposed ×8
					func(b *Backend) { b.k.q8z, b.k.vnni = false, false }, // AVX2
				} {
					be := New(Options{Threads: 2, QuantizeActivations: true})
					defer be.Close()
					set(be)
					a, b := be.Alloc(c.n, c.rows).(*kernels.Host), be.Alloc(c.n, c.rows).(*kernels.Host)
					be.MatMulExperts(a, x, w, start)
					pa, pb := be.Alloc(c.n, c.rows).(*kernels.Host), be.Alloc(c.n, c.rows).(*kernels.Host)
					be.MatMulExpertPair(pa, pb, x, w, wB, start)
					if !slicesBitEqual(a.F, pa.F) {
						t.Fatalf("variant %d: the pair's first output differs from MatMulExperts'", v)
					}
					be.MatMulExperts(b, x, wB, start)
					if !slicesBitEqual(b.F, pb.F) {
						t.Fatalf("variant %d: the pair's second output differs from MatMulExperts'", v)
					}
					outs[v] = [2]*kernels.Host{a, b}
				}
				for v := 1; v < 3; v++ {
					for i := range outs[0][0].F {
						for j := 0; j < 2; j++ {
							if g, want := outs[0][j].F[i], outs[v][j].F[i]; math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("output %d [%d,%d]: 4×16 tiles %v, variant %d %v", j, i/c.rows, i%c.rows, g, v, want)
							}
						}
					}
				}
			})
		}
	}
}

// slicesBitEqual reports whether a and b hold the same float32 bits.
func slicesBitEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestMatMulExpertsAllocs checks that a decode-sized call allocates
// nothing once the backend's scratch has grown.
func TestMatMulExpertsAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 7))
	w, start := expertCase(r, kernels.MXFP4, 8, 4, 256, 512)
	be := New(Options{Threads: 2})
	defer be.Close()
	x := &kernels.Host{R: 4, C: 512, F: randF(r, 4*512)}
	out := be.Alloc(4, 256)
	be.MatMulExperts(out, x, w, start)
	if a := testing.AllocsPerRun(20, func() {
		x.F[0]++
		be.MatMulExperts(out, x, w, start)
	}); a != 0 {
		t.Errorf("%v allocations per call", a)
	}
}

// TestCheckExperts lists the calls MatMulExperts refuses.
func TestCheckExperts(t *testing.T) {
	mk := func(dt kernels.DType, rows, cols int) kernels.Tensor {
		h, err := kernels.NewHostWeight(dt, rows, cols, make([]byte, rows*dt.RowBytes(cols)))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := mk(kernels.MXFP4, 8, 64), mk(kernels.MXFP4, 8, 64)
	x := &kernels.Host{R: 4, C: 64, F: make([]float32, 256)}
	out := &kernels.Host{R: 4, C: 8, F: make([]float32, 32)}
	for _, c := range []struct {
		name  string
		w     []kernels.Tensor
		start []int32
		want  string
	}{
		{"ok", []kernels.Tensor{a, b}, []int32{0, 1, 4}, ""},
		{"empty group nil", []kernels.Tensor{a, nil, b}, []int32{0, 1, 1, 4}, ""},
		{"starts", []kernels.Tensor{a, b}, []int32{0, 4}, "group starts"},
		{"first not 0", []kernels.Tensor{a}, []int32{1, 4}, "group starts"},
		{"decreasing", []kernels.Tensor{a, b}, []int32{0, 3, 2}, "before it starts"},
		{"nil with rows", []kernels.Tensor{a, nil}, []int32{0, 1, 2}, "no weight"},
		{"shape", []kernels.Tensor{a, mk(kernels.MXFP4, 4, 64)}, []int32{0, 1, 2}, "expert before"},
		{"type", []kernels.Tensor{a, mk(kernels.Q8_0, 8, 64)}, []int32{0, 1, 2}, "expert before"},
		{"too many rows", []kernels.Tensor{a, b}, []int32{0, 1, 5}, "for 5 rows"},
		{"x width", []kernels.Tensor{mk(kernels.MXFP4, 8, 32)}, []int32{0, 1}, "x 4×64"},
	} {
		err := kernels.CheckExperts(out, x, c.w, c.start)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// pairs: each list checked as above, and the two lists alike
	for _, c := range []struct {
		name   string
		wA, wB []kernels.Tensor
		start  []int32
		want   string
	}{
		{"pair ok", []kernels.Tensor{a, nil}, []kernels.Tensor{b, nil}, []int32{0, 4, 4}, ""},
		{"pair lengths", []kernels.Tensor{a, b}, []kernels.Tensor{b}, []int32{0, 1, 4}, "2 and 1 experts"},
		{"pair second list", []kernels.Tensor{a, b}, []kernels.Tensor{a, nil}, []int32{0, 1, 4}, "no weight"},
		{"pair shapes", []kernels.Tensor{a}, []kernels.Tensor{mk(kernels.MXFP4, 4, 64)}, []int32{0, 4}, "8×64 MXFP4 and 4×64"},
	} {
		err := kernels.CheckExpertPair(out, out, x, c.wA, c.wB, c.start)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestExpertUnitRows checks the cost-weighted work units of MatMulExperts
// (expertsTask.unitRow): for groups of 1 to 40 activation rows (some calls
// a pair: each group twice), weight rows not a multiple of 4 among them,
// the chunks that the pool cuts (and random cuts) cover every weight row of
// every group exactly once, in order; and the pool's chunks are of about
// equal cost (Σ over their weight rows of the group's rows + 1) where the
// groups' sizes differ by up to 40×, where equal numbers of weight rows
// would differ by that much.
func TestExpertUnitRows(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 11))
	for _, c := range []struct {
		groups []int
		rows   int
		pair   bool
	}{
		{[]int{1}, 8, false},
		{[]int{1, 1, 1, 1}, 2880, false},
		{[]int{40, 1, 1, 1, 1, 1, 1, 1}, 2880, false},
		{[]int{1, 2, 3, 4, 5, 16, 1, 1, 2}, 2880, true},
		{[]int{3, 1, 7}, 17, false},
		{[]int{2, 9, 1}, 33, true},
		{[]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 36}, 2880, true},
	} {
		t.Run(fmt.Sprintf("%v_%d_pair=%v", c.groups, c.rows, c.pair), func(t *testing.T) {
			ex := &expertsTask{rows: c.rows, ng: len(c.groups)}
			ex.start = []int32{0}
			for _, n := range c.groups {
				ex.start = append(ex.start, ex.start[len(ex.start)-1]+int32(n))
			}
			gs := len(c.groups)
			if c.pair {
				gs *= 2
			}
			total := 0
			for g := 0; g < gs; g++ {
				ex.cost = append(ex.cost, total)
				total += (c.groups[g%len(c.groups)] + 1) * c.rows
			}
			ex.cost = append(ex.cost, total)
			// the pool's cuts for 2 and 3 threads, and random cuts
			var cuts [][]int
			for _, threads := range []int{2, 3} {
				p := &pool{n: threads, bounds: make([]int, maxTail*threads+2)}
				nc := p.cut(total, 4, 0)
				cuts = append(cuts, append([]int(nil), p.bounds[:nc+1]...))
			}
			for range 20 {
				b := []int{0}
				for b[len(b)-1] < total {
					b = append(b, min(total, b[len(b)-1]+1+r.IntN(total/3+1)))
				}
				cuts = append(cuts, b)
			}
			for ci, b := range cuts {
				seen := make([]int, gs*c.rows)
				next := 0
				var costs []int
				for i := 0; i+1 < len(b); i++ {
					lo, hi := ex.unitRow(b[i]), ex.unitRow(b[i+1])
					if lo != next || hi < lo {
						t.Fatalf("cut %d: chunk %d covers rows [%d, %d) after %d", ci, i, lo, hi, next)
					}
					cost := 0
					for u := lo; u < hi; u++ {
						seen[u]++
						cost += c.groups[(u/c.rows)%len(c.groups)] + 1
					}
					costs = append(costs, cost)
					next = hi
				}
				for u, k := range seen {
					if k != 1 {
						t.Fatalf("cut %d: weight row %d of group %d covered %d times", ci, u%c.rows, u/c.rows, k)
					}
				}
				if ci < 2 && len(costs) > 2 && c.rows >= 2880 {
					// every chunk but the last (the remainder) within one
					// 4-row step of the group with the most rows of its share
					share := costs[0]
					for i, k := range costs[:len(costs)-1] {
						if d := k - share; d > 8*41 || d < -8*41 {
							t.Fatalf("cut %d: chunk %d costs %d units, the first %d (%v)", ci, i, k, share, costs)
						}
					}
				}
			}
		})
	}
}
