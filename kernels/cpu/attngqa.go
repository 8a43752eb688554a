package cpu

import (
	"math"

	"github.com/sluice-llm/sluice/kernels"
)

// Grouped-query attention: the query heads of one KV head (a GQA group)
// read the same key and value rows. The grouped kernels
// (attngqa_amd64.s) load each row once for up to 4 of the group's heads
// instead of once per head, so a group of 4 widens each float16 key and
// value once instead of 4 times. Every score and every output is summed in
// the per-head kernels' order (scores4's reduction for every key, value
// rows in position order per column), so the results are those of the
// per-head path except that the last keys of a block run, which scores1
// reduced in another order, now take scores4's.

// groupedAttn reports whether attention serves groups of query heads
// with the grouped kernels (AVX2, groups of at least 2, head sizes a
// multiple of 16). They also serve where AVX-512 is present: on an
// Emerald Rapids VM (BenchmarkAttentionDecode1B, alternated builds, load
// 18–23) they cost 20.6–21.2 CPU-ms per 16-sequence step of 256
// positions against 26.7–28.5 for the per-head AVX-512 kernels, and
// 4.3–4.4 against 8.7–9.3 for one sequence of 1024.
func (k kern) groupedAttn(group, hd int) bool {
	return k.avx2 && group >= 2 && hd%16 == 0
}

// gqaChunk returns how many of rem remaining heads the next grouped
// kernel call serves: 4, 2 or 1.
func gqaChunk(rem int) int {
	switch {
	case rem >= 4:
		return 4
	case rem >= 2:
		return 2
	}
	return 1
}

// interleave8 sets dst to the g queries of src (hd values each, one after
// another) interleaved in 8s: values 8j..8j+7 of query h at dst[(j·g+h)·8].
func interleave8(dst, src []float32, g, hd int) {
	for h := 0; h < g; h++ {
		q := src[h*hd : (h+1)*hd]
		for j := 0; j < hd; j += 8 {
			copy(dst[(j*g+h*8):(j*g+h*8)+8], q[j:j+8])
		}
	}
}

// scoresGroup sets out[h·os+p] = q_h · key p (keys stride elements apart
// in kc, or kh for a float16 cache) for the g heads (1, 2 or 4) whose
// queries q holds interleaved in 8s (interleave8) and p < n.
func (k kern) scoresGroup(q []float32, g int, kc []float32, kh []uint16, stride, n, hd int, out []float32, os int) {
	if n == 0 {
		return
	}
	_ = q[g*hd-1]
	_ = out[(g-1)*os+n-1]
	if kh != nil {
		_ = kh[(n-1)*stride+hd-1]
		switch g {
		case 4:
			scoresG4F16AVX2(&q[0], &kh[0], stride, n, hd, &out[0], os)
		case 2:
			scoresG2F16AVX2(&q[0], &kh[0], stride, n, hd, &out[0], os)
		default:
			k.scoresH(q[:hd], kh, stride, out[:n])
		}
		return
	}
	_ = kc[(n-1)*stride+hd-1]
	switch g {
	case 4:
		scoresG4AVX2(&q[0], &kc[0], stride, n, hd, &out[0], os)
	case 2:
		scoresG2AVX2(&q[0], &kc[0], stride, n, hd, &out[0], os)
	default:
		k.scores(q[:hd], kc, stride, out[:n])
	}
}

// wsumGroup adds Σ_p w[h·ws+p]·value p to out[h·hd : (h+1)·hd] for the g
// heads (1, 2 or 4) and p < n (values stride elements apart in vc, or vh
// for a float16 cache). With AVX-512 and hd a multiple of 64 the groups
// take the 64-column kernels (wsumG{2,4}[F16]AVX512: one pass over the
// rows per 64 columns instead of per 16 or 32, half the FMAs and
// conversions per value), whose sums are bit-equal to the AVX2 kernels'.
func (k kern) wsumGroup(w []float32, ws, g int, vc []float32, vh []uint16, stride, n, hd int, out []float32) {
	if n == 0 {
		return
	}
	_ = w[(g-1)*ws+n-1]
	_ = out[g*hd-1]
	if g == 2 && hd%32 != 0 {
		// the pair kernel takes 32 columns per pass: head by head
		k.wsumGroup(w, ws, 1, vc, vh, stride, n, hd, out)
		k.wsumGroup(w[ws:], ws, 1, vc, vh, stride, n, hd, out[hd:])
		return
	}
	z := k.simd && hd%64 == 0
	if vh != nil {
		_ = vh[(n-1)*stride+hd-1]
		switch {
		case z && g == 4:
			wsumG4F16AVX512(&w[0], ws, &vh[0], stride, n, hd, &out[0])
			return
		case z && g == 2:
			wsumG2F16AVX512(&w[0], ws, &vh[0], stride, n, hd, &out[0])
			return
		}
		switch g {
		case 4:
			wsumG4F16AVX2(&w[0], ws, &vh[0], stride, n, hd, &out[0])
		case 2:
			wsumG2F16AVX2(&w[0], ws, &vh[0], stride, n, hd, &out[0])
		default:
			k.wsumH(w[:n], vh, stride, out[:hd])
		}
		return
	}
	_ = vc[(n-1)*stride+hd-1]
	switch {
	case z && g == 4:
		wsumG4AVX512(&w[0], ws, &vc[0], stride, n, hd, &out[0])
		return
	case z && g == 2:
		wsumG2AVX512(&w[0], ws, &vc[0], stride, n, hd, &out[0])
		return
	}
	switch g {
	case 4:
		wsumG4AVX2(&w[0], ws, &vc[0], stride, n, hd, &out[0])
	case 2:
		wsumG2AVX2(&w[0], ws, &vc[0], stride, n, hd, &out[0])
	default:
		k.wsum(w[:n], vc, stride, out[:hd])
	}
}

// group computes row i's attention for all the query heads of KV head
// kvh: their scores in one pass over each block's keys, a softmax per
// head (with its sink), and their outputs in one pass over each block's
// values.
//
// When next ≥ 0, unit next (row next/KVHeads, KV head next%KVHeads) comes
// after this one on this thread: its first key blocks are prefetched
// during this unit's value pass, so that its start does not wait on
// memory.
func (t *attnTask) group(i, kvh, next, wk int) {
	s, a := t.s, t.a
	hd, w, bs := s.HeadDim, t.w, a.BlockSize
	g := s.Heads / s.KVHeads
	h0 := kvh * g
	sq := int(t.rowSeq[i])
	q1 := int(a.QStart[sq+1])
	ctx := int(a.CtxLen[sq]) - (q1 - i) + 1
	// a sliding-window layer reads only positions [first, ctx); the
	// scores of head h are sc[h·n : (h+1)·n], position first+j at j
	first := s.AttnFirst(ctx - 1)
	n := ctx - first
	table := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
	need := g*n + g*hd + g
	if cap(t.scores[wk]) < need {
		t.scores[wk] = make([]float32, need+256)
	}
	buf := t.scores[wk][:need]
	sc, qg, inv := buf[:g*n], buf[g*n:g*n+g*hd], buf[g*n+g*hd:]
	q := t.q.F[i*t.q.C+h0*hd : i*t.q.C+(h0+g)*hd]
	for c := 0; c < g; {
		gc := gqaChunk(g - c)
		interleave8(qg[c*hd:(c+gc)*hd], q[c*hd:(c+gc)*hd], gc, hd)
		c += gc
	}
	half := t.kc.DT == kernels.F16
	if half {
		// as ggml multiplies an F32 query with an F16 key cache: the
		// query is rounded to float16 first
		t.k.roundF16(qg, 1)
	}
	off := kvh * hd
	var kf, vf []float32
	var kh, vh []uint16
	if half {
		kh, vh = t.kc.H, t.vc.H
	} else {
		kf, vf = t.kc.F, t.vc.F
	}
	// Blocks lie anywhere in the cache (and a head's keys are t.w apart,
	// kvAt): each block's rows are prefetched attnAhead blocks before use. Positions are walked in runs
	// that stay inside one block: [p, end).
	nextBlock := func(p int) int { return (p/bs + 1) * bs }
	pf := func(c *kernels.Host, p int) {
		if p < ctx {
			end := min(ctx, nextBlock(p))
			at := t.at(table, p, off)
			if half {
				t.k.prefetchRowsH(c.H, at, w, end-p, hd)
			} else {
				t.k.prefetchRows(c.F, at, w, end-p, hd)
			}
		}
	}
	// rows returns the cache rows from position p's slot at this KV head.
	rows := func(f []float32, h []uint16, p int) ([]float32, []uint16) {
		at := t.at(table, p, off)
		if half {
			return nil, h[at:]
		}
		return f[at:], nil
	}
	for d, p := 0, first; d < attnAhead && p < ctx; d, p = d+1, nextBlock(p) {
		pf(t.kc, p)
	}
	for p := first; p < ctx; p = nextBlock(p) {
		pf(t.kc, p+attnAhead*bs)
		end := min(ctx, nextBlock(p))
		rf, rh := rows(kf, kh, p)
		for c := 0; c < g; {
			gc := gqaChunk(g - c)
			t.k.scoresGroup(qg[c*hd:], gc, rf, rh, w, end-p, hd, sc[c*n+p-first:], n)
			c += gc
		}
	}
	for d, p := 0, first; d < attnAhead && p < ctx; d, p = d+1, nextBlock(p) {
		pf(t.vc, p)
	}
	if next >= 0 {
		t.prefetchUnit(next)
	}
	for h := 0; h < g; h++ {
		x := sc[h*n : (h+1)*n]
		sink := float32(math.Inf(-1))
		if s.Sinks != nil {
			sink = s.Sinks[h0+h]
		}
		switch {
		case half:
			softmaxF16Vec(t.k, x, s.Scale, sink)
			inv[h] = 1
		case s.Sinks != nil:
			inv[h] = softmaxSinkUnnorm(t.k, x, s.Scale, sink)
		default:
			inv[h] = 1 / t.k.softmaxUnnorm(x, s.Scale)
		}
	}
	oh := t.out.F[i*t.out.C+h0*hd : i*t.out.C+(h0+g)*hd]
	clear(oh)
	for p := first; p < ctx; p = nextBlock(p) {
		pf(t.vc, p+attnAhead*bs)
		end := min(ctx, nextBlock(p))
		rf, rh := rows(vf, vh, p)
		for c := 0; c < g; {
			gc := gqaChunk(g - c)
			t.k.wsumGroup(sc[c*n+p-first:], n, gc, rf, rh, w, end-p, hd, oh[c*hd:])
			c += gc
		}
	}
	if !half {
		for h := 0; h < g; h++ {
			o := oh[h*hd : (h+1)*hd]
			for d := range o {
				o[d] *= inv[h]
			}
		}
	}
}

// prefetchUnit prefetches the first attnAhead key blocks of unit u (row
// u/KVHeads, KV head u%KVHeads).
func (t *attnTask) prefetchUnit(u int) {
	s, a := t.s, t.a
	i, kvh := u/s.KVHeads, u%s.KVHeads
	hd, bs := s.HeadDim, a.BlockSize
	sq := int(t.rowSeq[i])
	ctx := int(a.CtxLen[sq]) - (int(a.QStart[sq+1]) - i) + 1
	table := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
	for d, p := 0, s.AttnFirst(ctx-1); d < attnAhead && p < ctx; d, p = d+1, (p/bs+1)*bs {
		end := min(ctx, (p/bs+1)*bs)
		at := t.at(table, p, kvh*hd)
		if t.kc.DT == kernels.F16 {
			t.k.prefetchRowsH(t.kc.H, at, t.w, end-p, hd)
		} else {
			t.k.prefetchRows(t.kc.F, at, t.w, end-p, hd)
		}
	}
}
