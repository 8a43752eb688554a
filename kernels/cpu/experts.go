package cpu

import "github.com/sluice-llm/sluice/kernels"

// Mixture-of-experts execution: MatMulExperts runs each routed group of
// activation rows through its expert's weight. The work of one call is
// the (group, weight row) pairs of all groups with rows, laid end to end
// and weighed by their cost (unitRow), and the pool cuts that range into
// chunks of equal cost: a big expert's rows are split across workers and
// small experts are spread over them alike, and
// each weight row is read once, by one worker, for every row of its group
// (the stored-format kernels of qmat.go: batch-1 row loops for a group of
// one row, 4-row tiles above). The activations of the whole call are
// quantized once, and not again when the next call has the same input
// (gate and up). MXFP4 scale tables (mxfp4.go) are made for every row when
// the call has no more than mxTabRows rows, so that each group runs the
// kernels a MatMul of its rows alone would (the results are the same bit
// for bit either way).

// expertsTask is one MatMulExperts call.
type expertsTask struct {
	k      kern
	out, x *kernels.Host
	w      []*kernels.Host // the groups with rows, in order (then wB's, for a pair)
	start  []int32         // their first rows, then the end of the last
	ng     int             // the groups of the first weight list
	out2   *kernels.Host   // a pair's second output (groups ng and on)
	rows   int             // weight rows per expert
	cost   []int           // the groups' first work units, then the end (see unitRow)
	quant  bool            // act holds the call's quantized activations
	act    actQ

	// per worker: the qmat task of the group at hand and its views
	sub    []qmatTask
	xv, ov []kernels.Host
	pad    []padBuf // a group's rows padded to the tiles' 8 (padTo)
	padMin int      // the backend's override of padMinRows
}

// MatMulExperts implements kernels.ExpertMatMuler.
func (b *Backend) MatMulExperts(out, x kernels.Tensor, w []kernels.Tensor, start []int32) {
	if err := kernels.CheckExperts(out, x, w, start); err != nil {
		panic(err)
	}
	b.matMulExperts(out, nil, x, w, nil, start)
}

// MatMulExpertPair implements kernels.ExpertPairMatMuler: the groups of wB
// follow those of wA in one parallel op, on activations quantized once.
func (b *Backend) MatMulExpertPair(outA, outB, x kernels.Tensor, wA, wB []kernels.Tensor, start []int32) {
	if err := kernels.CheckExpertPair(outA, outB, x, wA, wB, start); err != nil {
		panic(err)
	}
	b.matMulExperts(outA, outB, x, wA, wB, start)
}

// matMulExperts runs MatMulExperts(out, x, w, start) and, with wB,
// MatMulExperts(outB, x, wB, start) as one op.
func (b *Backend) matMulExperts(out, outB, x kernels.Tensor, w, wB []kernels.Tensor, start []int32) {
	oh, xh := out.(*kernels.Host), x.(*kernels.Host)
	t := &b.ex
	t.w, t.start, t.out2 = t.w[:0], t.start[:0], nil
	var w0 *kernels.Host
	minRows, maxRows := 0, 0 // the smallest and largest group's rows
	for g, wt := range w {
		if rows := int(start[g+1] - start[g]); rows > 0 {
			w0 = wt.(*kernels.Host)
			t.w = append(t.w, w0)
			t.start = append(t.start, start[g])
			if minRows == 0 || rows < minRows {
				minRows = rows
			}
			maxRows = max(maxRows, rows)
		}
	}
	if w0 == nil {
		return
	}
	t.ng = len(t.w)
	if wB != nil {
		t.out2 = outB.(*kernels.Host)
		for g, wt := range wB {
			if start[g+1] > start[g] {
				t.w = append(t.w, wt.(*kernels.Host))
			}
		}
	}
	n := int(start[len(w)])
	t.start = append(t.start, int32(n))
	if len(t.sub) < b.pool.n {
		t.sub = make([]qmatTask, b.pool.n)
		t.xv = make([]kernels.Host, b.pool.n)
		t.ov = make([]kernels.Host, b.pool.n)
		t.pad = make([]padBuf, b.pool.n)
	}
	t.padMin = b.padMin
	for i := range t.sub {
		t.sub[i].prepareHalf(b.pool.n)
	}
	if !b.expertKernels(w0) {
		// F32 (and float Q8_0 and MXFP4) experts: one MatMul per group,
		// on views held by the task (no allocation)
		for g, wg := range t.w {
			o, gs := oh, g
			if g >= t.ng {
				o, gs = t.out2, g-t.ng
			}
			lo, hi := int(t.start[gs]), int(t.start[gs+1])
			t.xv[0], t.ov[0] = *kernels.HostRows(xh, lo, hi), *kernels.HostRows(o, lo, hi)
			b.MatMul(&t.ov[0], &t.xv[0], wg, hi-lo)
		}
		clear(t.w)
		t.out2 = nil
		return
	}
	t.k, t.out, t.x, t.rows = b.k, oh, xh, w0.R
	q, _ := quantized(w0.DT)
	if t.quant = q; q {
		// the groups' views derive the tiles' layouts of their own rows
		// (run): the call's rows need none
		_, blk := quantized(w0.DT)
		t.act.quantizeRows(b.k, xh.F, xh.C, n, w0.C, blk)
		t.act.padRows(n)
	}
	t.act.c16, t.act.c32 = t.act.c16[:0], t.act.c32[:0]
	if w0.DT == kernels.MXFP4 && b.k.avx2 {
		// corrections, tables for all rows when there are no more than
		// mxTabRows and the group quantization when a group takes the
		// group tiles (as a MatMul of each group's rows alone would
		// make), each group's used by its rows only
		t.act.mxfp4Prep(b.k, b.mxgRows(minRows), b.mxgRows(maxRows))
	}
	t.cost = t.cost[:0]
	total := 0
	for g := range t.w {
		gs := g
		if g >= t.ng {
			gs = g - t.ng
		}
		t.cost = append(t.cost, total)
		total += (int(t.start[gs+1]-t.start[gs]) + 1) * t.rows
	}
	t.cost = append(t.cost, total)
	if n*t.rows*w0.C*len(t.w)/t.ng < 1<<15 { // (the rows' work, twice for a pair)
		t.run(0, total, 0)
	} else {
		b.pool.parallel(total, 4, 0, t)
	}
	t.out, t.out2, t.x = nil, nil, nil
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

// unitRow maps a work unit to a weight row of the groups laid end to end
// (group g's row r is g·rows + r). The units weigh the groups by their
// cost: a weight row of a group of n activation rows is n + 1 units (its
// tiles cost about n block-rows plus the weight block's decode and
// stream), so that the pool's equal chunks are of about equal CPU time
// however the rows fall on the experts. Unit u of group g maps to its
// weight row (u − cost[g]) / (n+1) rounded down to a multiple of 4; the
// map is monotone with unitRow(0) = 0 and unitRow(total) = the rows' end,
// so the chunks [lo, hi) that the pool hands out cover every weight row
// once.
func (t *expertsTask) unitRow(u int) int {
	g := len(t.cost) - 2
	if u >= t.cost[g+1] {
		return (g + 1) * t.rows
	}
	for u < t.cost[g] {
		g--
	}
	per := (t.cost[g+1] - t.cost[g]) / t.rows
	r := (u - t.cost[g]) / per &^ 3
	return g*t.rows + r
}

// run computes work units [lo, hi): the weight rows of the groups from
// unitRow(lo) to unitRow(hi).
func (t *expertsTask) run(lo, hi, wk int) {
	lo, hi = t.unitRow(lo), t.unitRow(hi)
	K := t.x.C
	for u := lo; u < hi; {
		g, r0 := u/t.rows, u%t.rows
		r1 := min(t.rows, r0+hi-u)
		out, gs := t.out, g
		if g >= t.ng { // a pair's second projection
			out, gs = t.out2, g-t.ng
		}
		s, e := int(t.start[gs]), int(t.start[gs+1])
		xv, ov, sub := &t.xv[wk], &t.ov[wk], &t.sub[wk]
		*xv = kernels.Host{R: e - s, C: K, F: t.x.F[s*K : e*K]}
		*ov = kernels.Host{R: e - s, C: out.C, F: out.F[s*out.C : e*out.C]}
		sub.k, sub.out, sub.x, sub.w, sub.n = t.k, ov, xv, t.w[g], e-s
		np := e - s
		if t.quant {
			np = padTo(t.k, t.padMin, t.w[g], e-s)
		}
		if a := &t.act; np != e-s {
			// the group's rows padded with zero rows, as a MatMul of
			// them alone pads them (pad.go); outputs copied below
			*ov = t.pad[wk].rows(&sub.act, a, s, e, np, out.C)
			sub.out, sub.n = ov, np
			sub.act.derive(t.k, t.w[g].DT, t.rows)
		} else if t.quant {
			nb := K / a.blk
			sub.act = actQ{q: a.q[s*K : e*K], d: a.d[s*nb : e*nb], bs: a.bs[s*K/16 : e*K/16], blk: a.blk, k: K, n: e - s, nx: e - s, tile8Act: sub.act.tile8Act.emptied()}
			sub.act.derive(t.k, t.w[g].DT, t.rows) // the tiles' layouts of these rows (the worker's buffers)
			if len(a.c16) > 0 {
				sub.act.c16 = a.c16[s*K/2 : e*K/2]
			}
			if len(a.c32) > 0 {
				sub.act.c32 = a.c32[s*K/4 : e*K/4]
			}
			if a.mxsOK { // the group's rows' MXFP4 scale tables
				sub.act.mxs, sub.act.mxsOK = a.mxs[s*nb*256:e*nb*256], true
			}
			if a.mxg.ok { // and their group quantization
				sub.act.mxg = a.mxg.rows(s)
			}
		}
		sub.run(r0, r1, wk)
		if np != e-s {
			for m := 0; m < e-s; m++ {
				copy(out.F[(s+m)*out.C+r0:(s+m)*out.C+r1], ov.F[m*out.C+r0:m*out.C+r1])
			}
		}
		sub.out, sub.x, sub.w = nil, nil, nil
		u += r1 - r0
	}
}
