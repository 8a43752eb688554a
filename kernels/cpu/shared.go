package cpu

import "github.com/sluice-llm/sluice/kernels"

// maxShared is the most weights MatMulShared runs as one op (q, k and v).
const maxShared = 4

// sharedTask runs the batch-1 row loops of several weights that multiply
// the same activation row as one parallel op: the units are the rows of
// all the weights one after another, and a chunk may span two weights.
type sharedTask struct {
	q     *qmatTask // holds the activation row, quantized once
	parts [maxShared]sharedPart
	np    int
}

// sharedPart is one weight of a sharedTask and its rows' first unit.
type sharedPart struct {
	w, out *kernels.Host
	start  int
}

func (t *sharedTask) run(lo, hi, _ int) {
	for i := range t.parts[:t.np] {
		p := &t.parts[i]
		a, b := max(lo, p.start), min(hi, p.start+p.w.R)
		if a < b {
			t.q.rows1(p.w, p.out, a-p.start, b-p.start)
		}
	}
}

// MatMulShared implements kernels.SharedMatMuler. One activation row
// against up to maxShared weights in stored encodings that have batch-1
// row loops (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; every quantized one
// with the same activation blocks) runs as one parallel op whose chunks
// shrink towards its end: one hand-off to the second thread and one join
// instead of one per weight. Each row is computed by the loop MatMul would
// use, on the same quantized activations, so the results are MatMul's bit
// for bit. F16/BF16 weights at one panel of 8–16 rows run as one op too
// (halfshared.go). Anything else runs as one MatMul per weight.
func (b *Backend) MatMulShared(outs []kernels.Tensor, x kernels.Tensor, ws []kernels.Tensor, n int) {
	if b.sharedHalfPanels(ws, n) {
		b.matmulSharedHalf(outs, x.(*kernels.Host), ws, n) // halfshared.go
		return
	}
	if !b.sharedRows1(ws, n) {
		for i, w := range ws {
			b.MatMul(outs[i], x, w, n)
		}
		return
	}
	xh := x.(*kernels.Host)
	q := &b.qm
	q.k, q.x, q.n = b.k, xh, 1
	w0 := ws[0].(*kernels.Host)
	if ok, _ := quantized(w0.DT); ok {
		q.act.quantizeFor(b.k, w0.DT, xh.F, xh.C, 1, w0.C, 1, w0.R)
	}
	for _, w := range ws {
		if w.(*kernels.Host).Repacked {
			q.act.permuteK()
			break
		}
	}
	t := &b.sh
	t.q, t.np = q, len(ws)
	total := 0
	for i, w := range ws {
		t.parts[i] = sharedPart{w: w.(*kernels.Host), out: outs[i].(*kernels.Host), start: total}
		total += t.parts[i].w.R
	}
	if total*w0.C < 1<<15 {
		t.run(0, total, 0)
	} else {
		b.pool.parallelGuided(total, 4, 0, t)
	}
	t.parts = [maxShared]sharedPart{}
	q.x = nil
}

// sharedRows1 reports whether MatMulShared can run ws as one op: one
// activation row, the AVX2 row loops, and stored weights of one column
// count whose encodings all have a row loop and quantize the activations
// alike (or not at all).
func (b *Backend) sharedRows1(ws []kernels.Tensor, n int) bool {
	if n != 1 || !b.k.avx2 || len(ws) == 0 || len(ws) > maxShared {
		return false
	}
	w0, ok := ws[0].(*kernels.Host)
	if !ok {
		return false
	}
	q0, blk0 := quantized(w0.DT)
	for _, wt := range ws {
		w, ok := wt.(*kernels.Host)
		if !ok || w.P != nil || w.C != w0.C || !b.stored(w, n) {
			return false
		}
		if q, blk := quantized(w.DT); q != q0 || blk != blk0 {
			return false
		}
		switch w.DT {
		case kernels.F16, kernels.BF16:
			if w.C%32 != 0 {
				return false
			}
		case kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
		default:
			return false
		}
	}
	return true
}
