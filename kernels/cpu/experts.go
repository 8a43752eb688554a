package cpu

import "github.com/sluice-llm/sluice/kernels"

// Mixture-of-experts execution: MatMulExperts runs each routed group of
// activation rows through its expert's weight. The work units of one call
// are the (group, weight row) pairs of all groups with rows, laid end to
// end, and the pool cuts that range into chunks: a big expert's rows are
// split across workers and small experts are spread over them alike, and
// each weight row is read once, by one worker, for every row of its group
// (the stored-format kernels of qmat.go: batch-1 row loops for a group of
// one row, 4-row tiles above). The activations of the whole call are
// quantized once, and not again when the next call has the same input
// (gate and up).

// expertsTask is one MatMulExperts call.
type expertsTask struct {
	k      kern
	out, x *kernels.Host
	w      []*kernels.Host // the groups with rows, in order
	start  []int32         // their first rows, then the end of the last
	rows   int             // weight rows per expert
	quant  bool            // act holds the call's quantized activations
	act    actQ

	// per worker: the qmat task of the group at hand and its views
	sub    []qmatTask
	xv, ov []kernels.Host
}

// MatMulExperts implements kernels.ExpertMatMuler.
func (b *Backend) MatMulExperts(out, x kernels.Tensor, w []kernels.Tensor, start []int32) {
	if err := kernels.CheckExperts(out, x, w, start); err != nil {
		panic(err)
	}
	oh, xh := out.(*kernels.Host), x.(*kernels.Host)
	t := &b.ex
	t.w, t.start = t.w[:0], t.start[:0]
	var w0 *kernels.Host
	for g, wt := range w {
		if start[g+1] > start[g] {
			w0 = wt.(*kernels.Host)
			t.w = append(t.w, w0)
			t.start = append(t.start, start[g])
		}
	}
	if w0 == nil {
		return
	}
	n := int(start[len(w)])
	t.start = append(t.start, int32(n))
	if len(t.sub) < b.pool.n {
		t.sub = make([]qmatTask, b.pool.n)
		t.xv = make([]kernels.Host, b.pool.n)
		t.ov = make([]kernels.Host, b.pool.n)
	}
	if !b.expertKernels(w0) {
		// F32 (and float Q8_0 and MXFP4) experts: one MatMul per group,
		// on views held by the task (no allocation)
		for g, wg := range t.w {
			lo, hi := int(t.start[g]), int(t.start[g+1])
			t.xv[0], t.ov[0] = *kernels.HostRows(xh, lo, hi), *kernels.HostRows(oh, lo, hi)
			b.MatMul(&t.ov[0], &t.xv[0], wg, hi-lo)
		}
		clear(t.w)
		return
	}
	t.k, t.out, t.x, t.rows = b.k, oh, xh, w0.R
	q, blk := quantized(w0.DT)
	if t.quant = q; q {
		t.act.quantize(b.k, xh.F, xh.C, n, w0.C, blk)
	}
	t.act.c16 = t.act.c16[:0]
	if w0.DT == kernels.MXFP4 && b.k.avx2 {
		t.act.mxfp4Corr()
	}
	total := len(t.w) * t.rows
	if n*t.rows*w0.C < 1<<15 {
		t.run(0, total, 0)
	} else {
		b.pool.parallel(total, 4, 0, t)
	}
	t.out, t.x = nil, nil
	clear(t.w)
}

// expertKernels reports whether experts like w run on the stored-format
// kernels (qmat.go) inside one parallel op: every block type except Q8_0
// and MXFP4 when MatMul would take the float path for them.
func (b *Backend) expertKernels(w *kernels.Host) bool {
	switch w.DT {
	case kernels.F32:
		return false
	case kernels.Q8_0:
		return b.mm.q8act && !b.k.simd
	case kernels.MXFP4:
		return b.mm.q8act
	}
	return true
}

// run computes units [lo, hi): weight rows of the groups, rows apart.
func (t *expertsTask) run(lo, hi, wk int) {
	K := t.x.C
	for u := lo; u < hi; {
		g, r0 := u/t.rows, u%t.rows
		r1 := min(t.rows, r0+hi-u)
		s, e := int(t.start[g]), int(t.start[g+1])
		xv, ov, sub := &t.xv[wk], &t.ov[wk], &t.sub[wk]
		*xv = kernels.Host{R: e - s, C: K, F: t.x.F[s*K : e*K]}
		*ov = kernels.Host{R: e - s, C: t.out.C, F: t.out.F[s*t.out.C : e*t.out.C]}
		sub.k, sub.out, sub.x, sub.w, sub.n = t.k, ov, xv, t.w[g], e-s
		if a := &t.act; t.quant {
			nb := K / a.blk
			sub.act = actQ{q: a.q[s*K : e*K], d: a.d[s*nb : e*nb], bs: a.bs[s*K/16 : e*K/16], blk: a.blk, k: K, n: e - s, d8: sub.act.d8[:0], s8: sub.act.s8[:0]}
			sub.act.scales8() // the ×8 tiles' scales of these rows (the worker's buffer)
			if len(a.c16) > 0 {
				sub.act.c16 = a.c16[s*K/2 : e*K/2]
			}
			if a.mxsOK { // the group's rows' MXFP4 scale tables
				sub.act.mxs, sub.act.mxsOK = a.mxs[s*nb*256:e*nb*256], true
			}
		}
		sub.run(r0, r1, wk)
		sub.out, sub.x, sub.w = nil, nil, nil
		u += r1 - r0
	}
}
