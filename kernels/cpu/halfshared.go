package cpu

import "github.com/sluice-llm/sluice/kernels"

// F16/BF16 products that share their activations at one panel (8–16 rows,
// e.g. q/k/v and gate/up at 16-sequence decode) run as one parallel op:
// the activations are packed once for all the weights (packPanels), the
// units are the rows of all the weights one after another, and a chunk may
// span two weights. Each weight's rows run on halfPanels as MatMul runs
// them, on the same packed panel, and the panel path's sums do not depend
// on the range a thread is given, so the results are MatMul's bit for bit;
// one hand-off and one join replace one per weight, and the op's guided
// chunks leave one small chunk at its end instead of one per weight.

// halfSharedTask is the op: one qmatTask per weight, each a view of the
// backend's qmatTask (its packed panel and per-worker scratch) with its
// own weight and output.
type halfSharedTask struct {
	parts [maxShared]qmatTask
	start [maxShared + 1]int // part i holds units [start[i], start[i+1])
	np    int
}

func (t *halfSharedTask) run(lo, hi, wk int) {
	for i := range t.parts[:t.np] {
		a, b := max(lo, t.start[i]), min(hi, t.start[i+1])
		if a < b {
			t.parts[i].run(a-t.start[i], b-t.start[i], wk)
		}
	}
}

// sharedHalfPanels reports whether MatMulShared runs ws on n rows as one
// panel op: at most maxShared F16/BF16 weights of one column count in
// their stored encoding, all on the one-panel path (t.panels) for n rows.
func (b *Backend) sharedHalfPanels(ws []kernels.Tensor, n int) bool {
	if n < 2 || n > 16 || !b.k.avx2 || len(ws) < 2 || len(ws) > maxShared {
		return false
	}
	w0, ok := ws[0].(*kernels.Host)
	if !ok {
		return false
	}
	pt := qmatTask{k: b.k} // panels reads only the kernel flags
	for _, wt := range ws {
		w, ok := wt.(*kernels.Host)
		if !ok || w.P != nil || w.C != w0.C || w.C < 8 || !b.stored(w, n) {
			return false
		}
		if w.DT != kernels.F16 && w.DT != kernels.BF16 || !pt.panels(w.DT, n, w.C) {
			return false
		}
	}
	return true
}

// matmulSharedHalf runs ws (sharedHalfPanels) as one op.
func (b *Backend) matmulSharedHalf(outs []kernels.Tensor, x *kernels.Host, ws []kernels.Tensor, n int) {
	q := &b.qm
	w0 := ws[0].(*kernels.Host)
	q.k, q.out, q.x, q.w, q.n = b.k, outs[0].(*kernels.Host), x, w0, n
	q.prepareHalf(b.pool.n)
	q.packPanels()
	t := &b.shh
	t.np = len(ws)
	for i, w := range ws {
		wh := w.(*kernels.Host)
		p := &t.parts[i]
		p.k, p.out, p.x, p.w, p.n = b.k, outs[i].(*kernels.Host), x, wh, n
		p.hp, p.xp, p.xpN = q.hp, q.xp, q.xpN
		t.start[i+1] = t.start[i] + wh.R
	}
	total := t.start[t.np]
	if n*total*w0.C < 1<<15 {
		t.run(0, total, 0)
	} else {
		b.pool.parallelGuidedFine(total, halfZMaxW1, 0, t)
	}
	for i := range t.parts[:t.np] {
		p := &t.parts[i]
		p.out, p.x, p.w, p.hp, p.xp, p.xpN = nil, nil, nil, nil, nil, 0
	}
	q.out, q.x, q.w, q.xpN = nil, nil, nil, 0
}
