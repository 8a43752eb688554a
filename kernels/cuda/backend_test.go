//go:build cuda

package cuda

// GPU tests: every kernel against the reference backend (kernels.Ref) on
// random inputs. Without a GPU they skip (Open fails cleanly: the driver is
// loaded at run time), unless SLUICE_CUDA_REQUIRE=1 (scripts/gpu-run.sh
// sets it), which turns the skip into a failure.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

const f32Tol = 1e-5 // relative L2 error against the reference, F32

func openOrSkip(t testing.TB) *Backend {
	t.Helper()
	b, err := Open(Options{})
	if err != nil {
		if os.Getenv("SLUICE_CUDA_REQUIRE") == "1" {
			t.Fatalf("no usable CUDA device (SLUICE_CUDA_REQUIRE=1): %v", err)
		}
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestDeviceAndLibraries reports the device and the libraries Open loaded
// (scripts/gpu-run.sh copies the line into its report).
func TestDeviceAndLibraries(t *testing.T) {
	b := openOrSkip(t)
	drv, drvVer, cb, cbVer := b.Libraries()
	name, mem, peak, err := b.DeviceInfo()
	if err != nil {
		t.Fatal(err)
	}
	major, minor, sms, err := b.ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device: %s, %d MiB, compute %d.%d, %d SMs, peak %.0f GB/s; driver %s (API %d); cuBLAS %s (%d)",
		name, mem>>20, major, minor, sms, peak/1e9, drv, drvVer, cb, cbVer)
	if drv == "" || drvVer <= 0 || cb == "" || cbVer <= 0 || major < 8 || sms <= 0 || peak <= 0 {
		t.Fatalf("implausible device facts: driver %q %d, cuBLAS %q %d, compute %d.%d, %d SMs, peak %v", drv, drvVer, cb, cbVer, major, minor, sms, peak)
	}
}

// pair holds the same tensor on the reference and the CUDA backend.
type pair struct{ ref, dev kernels.Tensor }

type rig struct {
	t   *testing.T
	ref *kernels.Ref
	dev *Backend
	rng *rand.Rand
}

func newRig(t *testing.T) *rig {
	return &rig{t: t, ref: kernels.NewRef(), dev: openOrSkip(t), rng: rand.New(rand.NewPCG(1, 2))}
}

func (r *rig) randF(n int, scale float32) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = (r.rng.Float32()*2 - 1) * scale
	}
	return f
}

// f32 makes a rows×cols pair holding data (each backend gets its own copy:
// some ops write in place).
func (r *rig) f32(rows, cols int, data []float32) pair {
	r.t.Helper()
	rt, err := r.ref.WeightF32(rows, cols, append([]float32(nil), data...))
	if err != nil {
		r.t.Fatal(err)
	}
	dt, err := r.dev.WeightF32(rows, cols, data)
	if err != nil {
		r.t.Fatal(err)
	}
	return pair{rt, dt}
}

func (r *rig) rand(rows, cols int) pair { return r.f32(rows, cols, r.randF(rows*cols, 1)) }

func (r *rig) q8(rows, cols int) pair {
	r.t.Helper()
	q := quant.QuantizeQ8_0(r.randF(rows*cols, 1))
	rt, err := r.ref.Weight(kernels.Q8_0, rows, cols, q)
	if err != nil {
		r.t.Fatal(err)
	}
	dt, err := r.dev.Weight(kernels.Q8_0, rows, cols, q)
	if err != nil {
		r.t.Fatal(err)
	}
	return pair{rt, dt}
}

func (r *rig) alloc(rows, cols int) pair {
	return pair{r.ref.Alloc(rows, cols), r.dev.Alloc(rows, cols)}
}

// check compares the first n rows of p on both backends.
func (r *rig) check(what string, p pair, n int, tol float64) {
	r.t.Helper()
	want := append([]float32(nil), r.ref.ToHost(p.ref, n)...)
	got := r.dev.ToHost(p.dev, n)
	if e := relErr(got, want); !(e <= tol) {
		r.t.Errorf("%s: relative error %.3g > %.0g (got[:4]=%v want[:4]=%v)", what, e, tol, got[:min(4, len(got))], want[:min(4, len(want))])
	}
}

// relErr is ‖got − want‖₂ / ‖want‖₂ (the plain norm when want is 0).
func relErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, w float64
	for i := range want {
		x := float64(got[i]) - float64(want[i])
		d += x * x
		w += float64(want[i]) * float64(want[i])
	}
	if w == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / w)
}

// TestContextOnAnyThread runs driver and cuBLAS calls on an OS thread with
// no current context, as a goroutine finds after moving between two cgo
// calls (on a 16-core H200 the runner's step-metadata cuMemAlloc failed
// with CUDA_ERROR_INVALID_CONTEXT): each call must make the backend's
// context current itself.
func TestContextOnAnyThread(t *testing.T) {
	b := openOrSkip(t)
	const n = 64
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // a thread of its own, left without a context
		defer runtime.UnlockOSThread()
		d := b.drv
		if err := d.detachThread(); err != nil {
			done <- err
			return
		}
		w, err := d.memAlloc(n * n * 4)
		if err != nil {
			done <- err
			return
		}
		defer d.memFree(w)
		host := make([]float32, n*n)
		for i := range host {
			host[i] = float32(i%7) - 3
		}
		if err := d.detachThread(); err != nil {
			done <- err
			return
		}
		if err := d.htoD(w, unsafe.Pointer(&host[0]), n*n*4); err != nil {
			done <- err
			return
		}
		if err := d.detachThread(); err != nil {
			done <- err
			return
		}
		if err := b.blas.gemmNT(n, n, n, w, n, w, n, w, n); err != nil {
			done <- err
			return
		}
		if err := d.detachThread(); err != nil {
			done <- err
			return
		}
		done <- d.sync(b.stream)
	}()
	if err := <-done; err != nil {
		t.Fatalf("driver call on a thread without a current context: %v", err)
	}
}

func TestMatMul(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		name        string
		n, in, out  int
		q8          bool
		rowsAlloced int
	}{
		{"f32/decode", 1, 64, 48, false, 4},
		{"f32/batch", 13, 288, 768, false, 16},
		{"f32/odd", 5, 97, 33, false, 5},
		{"q8/decode", 1, 64, 48, true, 4},
		{"q8/batch", 9, 288, 131, true, 12},
		{"q8/rows-39", 39, 2048, 50, true, 39},
		{"q8/wide-40", 40, 288, 131, true, 40},
		{"q8/wide-2-slices", 33, 2048, 4200, true, 40}, // 4200 widened rows exceed the 32 MiB scratch
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			x := r.rand(tc.rowsAlloced, tc.in)
			w := r.rand(tc.out, tc.in)
			if tc.q8 {
				w = r.q8(tc.out, tc.in)
			}
			o := r.alloc(tc.rowsAlloced, tc.out)
			r.ref.MatMul(o.ref, x.ref, w.ref, tc.n)
			r.dev.MatMul(o.dev, x.dev, w.dev, tc.n)
			r.check("matmul", o, tc.n, f32Tol)
		})
	}
}

func TestElementwise(t *testing.T) {
	r := newRig(t)
	const n, rows, cols = 5, 8, 96
	t.Run("rmsnorm/row", func(t *testing.T) {
		r.t = t
		x, w, o := r.rand(rows, cols), r.rand(1, cols), r.alloc(rows, cols)
		r.ref.RMSNorm(o.ref, x.ref, w.ref, n, 1e-5)
		r.dev.RMSNorm(o.dev, x.dev, w.dev, n, 1e-5)
		r.check("rmsnorm", o, n, f32Tol)
	})
	t.Run("rmsnorm/head-inplace", func(t *testing.T) {
		r.t = t
		x, w := r.rand(rows, cols), r.rand(1, 32)
		r.ref.RMSNorm(x.ref, x.ref, w.ref, n, 1e-6)
		r.dev.RMSNorm(x.dev, x.dev, w.dev, n, 1e-6)
		r.check("rmsnorm per head", x, n, f32Tol)
	})
	t.Run("silu_mul", func(t *testing.T) {
		r.t = t
		g, u := r.f32(rows, cols, r.randF(rows*cols, 8)), r.rand(rows, cols)
		r.ref.SiLUMul(g.ref, g.ref, u.ref, n)
		r.dev.SiLUMul(g.dev, g.dev, u.dev, n)
		r.check("silu_mul", g, n, f32Tol)
	})
	t.Run("add", func(t *testing.T) {
		r.t = t
		a, b, o := r.rand(rows, cols), r.rand(rows, cols), r.alloc(rows, cols)
		r.ref.Add(o.ref, a.ref, b.ref, n)
		r.dev.Add(o.dev, a.dev, b.dev, n)
		r.check("add", o, n, f32Tol)
	})
	t.Run("add_row", func(t *testing.T) {
		r.t = t
		x, b := r.rand(rows, cols), r.rand(1, cols)
		r.ref.AddRow(x.ref, b.ref, n)
		r.dev.AddRow(x.dev, b.dev, n)
		r.check("add_row", x, rows, f32Tol) // rows past n must stay untouched
	})
}

func TestRoPE(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		name           string
		headDim, heads int
		style          kernels.RoPEStyle
	}{
		{"interleaved/d16", 16, 6, kernels.RoPEInterleaved},
		{"half/d64", 64, 4, kernels.RoPEHalf},
		{"half/d128", 128, 3, kernels.RoPEHalf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			const maxPos, rows = 512, 7
			inv := make([]float64, tc.headDim/2)
			for j := range inv {
				inv[j] = math.Pow(10000, -2*float64(j)/float64(tc.headDim))
			}
			table := r.f32(maxPos, tc.headDim, kernels.RoPETable(maxPos, inv))
			x := r.f32(rows, tc.heads*tc.headDim, r.randF(rows*tc.heads*tc.headDim, 2))
			pos := []int32{0, 1, 2, 511, 100, 37, 300}
			r.ref.RoPE(x.ref, pos, table.ref, tc.headDim, tc.style)
			r.dev.RoPE(x.dev, pos, table.dev, tc.headDim, tc.style)
			r.check("rope", x, rows, f32Tol)
		})
	}
}

func TestEmbedGather(t *testing.T) {
	r := newRig(t)
	const vocab, dim = 300, 64
	toks := []int32{5, 0, 299, 17, 17, 250}
	t.Run("embed/f32", func(t *testing.T) {
		r.t = t
		tab, o := r.rand(vocab, dim), r.alloc(8, dim)
		r.ref.Embed(o.ref, tab.ref, toks)
		r.dev.Embed(o.dev, tab.dev, toks)
		r.check("embed f32", o, len(toks), f32Tol)
	})
	t.Run("embed/q8_0", func(t *testing.T) {
		r.t = t
		tab, o := r.q8(vocab, dim), r.alloc(8, dim)
		r.ref.Embed(o.ref, tab.ref, toks)
		r.dev.Embed(o.dev, tab.dev, toks)
		r.check("embed q8_0", o, len(toks), f32Tol)
	})
	t.Run("gather", func(t *testing.T) {
		r.t = t
		x, o := r.rand(10, dim), r.alloc(4, dim)
		rows := []int32{9, 0, 4}
		r.ref.Gather(o.ref, x.ref, rows)
		r.dev.Gather(o.dev, x.dev, rows)
		r.check("gather", o, len(rows), f32Tol)
	})
}

// attnCase is a varlen batch: per sequence, the rows it brings this step
// and its context length after them.
type attnCase struct {
	name                    string
	heads, kvHeads, headDim int
	blockSize               int
	rows, ctx               []int32
}

func TestAttention(t *testing.T) {
	r := newRig(t)
	for _, tc := range []attnCase{
		{"decode/mha", 4, 4, 16, 16, []int32{1}, []int32{9}},
		{"prefill/gqa", 8, 2, 64, 16, []int32{7}, []int32{7}},
		{"mixed/gqa", 8, 2, 64, 16, []int32{7, 1, 5, 1}, []int32{7, 37, 21, 300}},
		{"long/d128", 4, 1, 128, 32, []int32{3, 1}, []int32{260, 1000}},
		{"d256/bs8", 2, 2, 256, 8, []int32{2, 1}, []int32{130, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			r.attention(tc)
		})
	}
}

func (r *rig) attention(tc attnCase) {
	r.t.Helper()
	a := kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: tc.blockSize}
	next := int32(0) // next free block; tables are reversed to scramble them
	for s := range tc.rows {
		nb := (tc.ctx[s] + int32(tc.blockSize) - 1) / int32(tc.blockSize)
		table := make([]int32, nb)
		for k := range table {
			table[k] = next + nb - 1 - int32(k)
		}
		next += nb
		for p := tc.ctx[s] - tc.rows[s]; p < tc.ctx[s]; p++ {
			a.Slots = append(a.Slots, table[p/int32(tc.blockSize)]*int32(tc.blockSize)+p%int32(tc.blockSize))
		}
		a.Tables = append(a.Tables, table...)
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		a.QStart = append(a.QStart, a.QStart[s]+tc.rows[s])
		a.CtxLen = append(a.CtxLen, tc.ctx[s])
	}
	n := int(a.QStart[len(a.QStart)-1])
	kvDim := tc.kvHeads * tc.headDim
	slots := int(next) * tc.blockSize
	// The caches start full of random history; this step's rows overwrite
	// their slots.
	kc, vc := r.rand(slots, kvDim), r.rand(slots, kvDim)
	k, v := r.rand(n, kvDim), r.rand(n, kvDim)
	q := r.rand(n, tc.heads*tc.headDim)
	o := r.alloc(n, tc.heads*tc.headDim)
	s := kernels.AttnShape{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim, Scale: float32(1 / math.Sqrt(float64(tc.headDim)))}
	r.ref.WriteKV(kc.ref, vc.ref, k.ref, v.ref, &a)
	r.dev.WriteKV(kc.dev, vc.dev, k.dev, v.dev, &a)
	r.check("k cache", kc, slots, f32Tol)
	r.check("v cache", vc, slots, f32Tol)
	r.ref.Attention(o.ref, q.ref, kc.ref, vc.ref, &a, s)
	r.dev.Attention(o.dev, q.dev, kc.dev, vc.dev, &a, s)
	r.check("attention", o, n, f32Tol)
}

func TestAttentionRejectsHugeHeads(t *testing.T) {
	b := openOrSkip(t)
	a := kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{1}, Tables: []int32{0}, TableStart: []int32{0, 1}, BlockSize: 16, Slots: []int32{0}}
	x := b.Alloc(16, 1024)
	b.Attention(x, x, x, x, &a, kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 1024, Scale: 1})
	if b.Err() == nil {
		t.Fatal("head dim 1024 accepted; the kernel supports at most 512")
	}
}

func TestSoftmax(t *testing.T) {
	r := newRig(t)
	const rows, vocab = 3, 5000
	data := r.randF(rows*vocab, 10)
	x := r.f32(rows, vocab, data)
	r.dev.Softmax(x.dev, rows)
	want := append([]float32(nil), data...)
	for i := range rows {
		kernels.Softmax(want[i*vocab : (i+1)*vocab])
	}
	if e := relErr(r.dev.ToHost(x.dev, rows), want); e > f32Tol {
		t.Errorf("softmax: relative error %.3g", e)
	}
}

// hostLogSoftmax returns the log-softmax of row at i.
func hostLogSoftmax(row []float32, i int) float64 {
	m := row[0]
	for _, v := range row {
		m = max(m, v)
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v - m))
	}
	return float64(row[i]-m) - math.Log(s)
}

func TestGreedy(t *testing.T) {
	r := newRig(t)
	const rows, vocab = 4, 32000
	data := r.randF(rows*vocab, 5)
	data[1*vocab+31999] = 50                  // the last index
	data[2*vocab+7], data[2*vocab+9] = 60, 60 // a tie: the lower index wins
	x := r.f32(rows, vocab, data)
	ids, lps := make([]int32, rows), make([]float32, rows)
	if err := r.dev.Greedy(x.dev, rows, ids, lps); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		row := data[i*vocab : (i+1)*vocab]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int(ids[i]) != best {
			t.Errorf("row %d: id %d, want %d", i, ids[i], best)
		}
		if want := hostLogSoftmax(row, best); math.Abs(float64(lps[i])-want) > 1e-4 {
			t.Errorf("row %d: logprob %v, want %v", i, lps[i], want)
		}
	}
}

// hostDraw is the sampling rule of sample_f32 on the host: keep the top-k
// then top-p set, draw by inverse CDF in vocabulary order. It also returns
// the distance of u·mass from the nearest cumulative boundary, so callers
// can skip draws that float rounding could flip.
func hostDraw(row []float32, p SampleParams) (int, float64) {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	// sort indices by logit, descending (stable)
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && row[idx[j]] > row[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	m := row[idx[0]]
	w := func(i int) float64 { return math.Exp(float64(row[i]-m) / float64(p.Temperature)) }
	keep := len(idx)
	if p.TopK > 0 && int(p.TopK) < keep {
		keep = int(p.TopK)
	}
	if p.TopP > 0 && p.TopP < 1 {
		var tot float64
		for _, i := range idx[:keep] {
			tot += w(i)
		}
		var acc float64
		for k, i := range idx[:keep] {
			acc += w(i)
			if acc >= float64(p.TopP)*tot {
				keep = k + 1
				break
			}
		}
	}
	kept := make([]bool, len(row))
	var mass float64
	for _, i := range idx[:keep] {
		kept[i] = true
		mass += w(i)
	}
	target := float64(p.U) * mass
	var acc float64
	gap := math.Inf(1)
	pick := -1
	for i := range row {
		if !kept[i] {
			continue
		}
		gap = min(gap, math.Abs(acc-target))
		acc += w(i)
		if pick < 0 && acc > target {
			pick = i
		}
	}
	return pick, gap / mass
}

func TestSampleRows(t *testing.T) {
	r := newRig(t)
	const vocab = 1000
	cases := []SampleParams{
		{Temperature: 0, U: 0.5},
		{Temperature: 1, TopK: 1, U: 0.9},
		{Temperature: 0.7, TopK: 20, U: 0.3},
		{Temperature: 1, TopP: 0.9, U: 0.61},
		{Temperature: 1.3, TopK: 50, TopP: 0.5, U: 0.05},
		{Temperature: 1, U: 0.999},
	}
	rows := len(cases)
	data := r.randF(rows*vocab, 4) // distinct values almost surely
	x := r.f32(rows, vocab, data)
	ids, lps := make([]int32, rows), make([]float32, rows)
	if err := r.dev.SampleRows(x.dev, rows, cases, ids, lps); err != nil {
		t.Fatal(err)
	}
	for i, p := range cases {
		row := data[i*vocab : (i+1)*vocab]
		var want int
		if p.Temperature <= 0 {
			want, _ = hostDraw(row, SampleParams{Temperature: 1, TopK: 1})
		} else {
			var gap float64
			want, gap = hostDraw(row, p)
			if gap < 1e-4 {
				t.Logf("row %d: u too close to a boundary (%.2g) for an exact check", i, gap)
				continue
			}
		}
		if int(ids[i]) != want {
			t.Errorf("row %d %+v: id %d, want %d", i, p, ids[i], want)
		}
		if lp := hostLogSoftmax(row, int(ids[i])); math.Abs(float64(lps[i])-lp) > 1e-4 {
			t.Errorf("row %d: logprob %v, want %v", i, lps[i], lp)
		}
	}
	if err := r.dev.SampleRows(x.dev, 1, []SampleParams{{Temperature: 1, U: 1}}, ids, lps); err == nil {
		t.Error("U = 1 accepted")
	}
}

func TestWeightRejectsBadShapes(t *testing.T) {
	b := openOrSkip(t)
	if _, err := b.Weight(kernels.F32, 2, 3, make([]byte, 20)); err == nil {
		t.Error("F32 2×3 from 20 bytes accepted")
	}
	if _, err := b.Weight(kernels.Q8_0, 1, 30, make([]byte, 34)); err == nil {
		t.Error("Q8_0 with 30 columns accepted")
	}
	if _, err := b.WeightF32(2, 2, make([]float32, 3)); err == nil {
		t.Error("F32 2×2 from 3 floats accepted")
	}
}

// BenchmarkMatMulDecode measures one decode-sized F32 GEMV (4096×4096) and
// reports the achieved memory bandwidth.
func BenchmarkMatMulDecode(b *testing.B) {
	be := openOrSkip(b)
	const dim = 4096
	w, err := be.WeightF32(dim, dim, make([]float32, dim*dim))
	if err != nil {
		b.Fatal(err)
	}
	x, o := be.Alloc(1, dim), be.Alloc(1, dim)
	be.MatMul(o, x, w, 1)
	if err := be.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		be.MatMul(o, x, w, 1)
	}
	if err := be.Synchronize(); err != nil {
		b.Fatal(err)
	}
	bw := float64(dim*dim*4) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(bw/1e9, "GB/s")
	if _, _, peak, err := be.DeviceInfo(); err == nil {
		b.ReportMetric(bw/peak, "frac-of-peak")
	}
}

// BenchmarkMatMulBatch sweeps the batch (rows of x) of the matmuls a
// 1B-shaped model's decode step runs, through each of MatMul's paths (F32:
// cuBLAS; Q8_0: matmul_q8_0 or widened slices through cuBLAS; "auto" is
// MatMul's own choice): time per call, weight GB/s (the
// stored bytes), its fraction of the device's peak bandwidth, GFLOP/s.
func BenchmarkMatMulBatch(b *testing.B) {
	be := openOrSkip(b)
	_, _, peak, _ := be.DeviceInfo()
	type path struct {
		name   string
		q8Wide int
	}
	f32Paths := []path{{"cublas", q8WideMin}}
	q8Paths := []path{{"auto", q8WideMin}, {"rows", 1 << 30}, {"wide", 1}}
	for _, sh := range []struct {
		name    string
		out, in int
	}{{"ffn-5632x2048", 5632, 2048}, {"head-32000x2048", 32000, 2048}} {
		for _, q8 := range []bool{false, true} {
			var w kernels.Tensor
			var err error
			typ, paths, wbytes := "f32", f32Paths, float64(sh.out*sh.in*4)
			if q8 {
				typ, paths, wbytes = "q8_0", q8Paths, float64(sh.out*sh.in/kernels.Q8Block*kernels.Q8BlockBytes)
				w, err = be.Weight(kernels.Q8_0, sh.out, sh.in, quant.QuantizeQ8_0(make([]float32, sh.out*sh.in)))
			} else {
				w, err = be.WeightF32(sh.out, sh.in, make([]float32, sh.out*sh.in))
			}
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range []int{1, 2, 4, 8, 16, 32, 64, 256} {
				x, o := be.Alloc(n, sh.in), be.Alloc(n, sh.out)
				for _, p := range paths {
					b.Run(fmt.Sprintf("%s/%s/%s/n=%d", sh.name, typ, p.name, n), func(b *testing.B) {
						be.q8WideMin = p.q8Wide
						defer func() { be.q8WideMin = q8WideMin }()
						be.MatMul(o, x, w, n)
						if err := be.Synchronize(); err != nil {
							b.Fatal(err)
						}
						b.ResetTimer()
						for range b.N {
							be.MatMul(o, x, w, n)
						}
						if err := be.Synchronize(); err != nil {
							b.Fatal(err)
						}
						s := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(s*1e6, "us/call")
						b.ReportMetric(wbytes/s/1e9, "weight-GB/s")
						if peak > 0 {
							b.ReportMetric(wbytes/s/peak, "frac-of-peak")
						}
						b.ReportMetric(2*float64(n*sh.out*sh.in)/s/1e9, "GFLOP/s")
					})
				}
			}
		}
	}
}
