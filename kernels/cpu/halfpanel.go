package cpu

import (
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
)

// Batches of at least halfPanelMinRows activation rows on BF16 weights,
// and F16 batches of over 16 rows with K past halfKc (usePanels): the
// weights are widened to float32 once per call and chunk of K, not once per group of activation rows as in the register tiles of
// half.go, and the products run on halfPanel kernels (halfpanel_amd64.s):
// 16 activation rows in the lanes of two ymm, stored k-major in a panel,
// times one broadcast weight per weight row, six weight rows per call.
//
//	the activations packed into k-major panels of 16 rows once per
//	MatMul (packPanels; each range packs its own in other tasks), then
//	for each range of up to halfPanelRange weight rows:
//	  two panels or more (n > 16):
//	    for each halfPanelKc-value chunk of K:
//	      for each block of halfPanelNb weight rows:
//	        widen the block's chunk to float32 (halfToF32*)
//	        for each 6 weight rows: prefetch the next block's rows,
//	          then for each panel: halfPanel, added to acc
//	  one panel (n ≤ 16; the MatMul's chunks shrink towards its end, as
//	  a chunk's cost is its rows' alone):
//	    for each 6 weight rows, for each chunk of K: halfPanel{W}{F16,BF16},
//	    which widens as it goes (each weight is used by one panel only)
//
// Each output sums its products in one lane, one fused multiply-add after
// another, into two accumulators: the even chunks of K into one and the
// odd ones into the other (so a sum is at most about K/2 additions deep,
// as deep as the plain path's two accumulators), added at the end. The
// order depends neither on the weight row's place in a tile nor on the
// range a thread was given, so results do not depend on the partition.
// On AVX-512 (kern.simd) every F16/BF16 batch of halfPanelZMinRows rows
// or more takes this path with the zmm kernels of halfz.go, in the same
// order (the same bits).

// The panel path's batch threshold and cache blocking.
const (
	halfPanelMinRows = 8   // fewer activation rows run on the register tiles of half.go
	halfPanelKc      = 256 // values of K per chunk: a panel's chunk (16 KiB) stays in L1
	halfPanelNb      = 48  // weight rows widened per block (48 KiB of float32 at halfPanelKc)
	halfPanelRange   = 384 // weight rows whose accumulators are held at once
	halfPanelMaxW    = 6   // the widest halfPanel kernel (weight rows per call)
)

// usePanels reports whether a batch of n rows on weights of type dt (F16
// or BF16) with k values per row runs on the panel path: BF16 batches of
// halfPanelMinRows rows or more, and F16 batches of two panels or more
// (over 16 rows) whose rows are longer than the tiles' slice of K
// (halfKc). Widening BF16 takes two vector ALU operations (zero-extend,
// shift) per 8 weights, which the register tiles repeat for every group
// of 4 activation rows; F16's single VCVTPH2PS costs the tiles too little
// for the panel path to gain where K fits one slice, but past it each
// tile call ends in horizontal sums added to out per slice, and the panel
// path (sums held in acc per chunk) is faster (docs/bench/f16-bf16.md,
// "Panel path" and "Prefetching the panel path's weights").
func usePanels(dt kernels.DType, n, k int) bool {
	switch dt {
	case kernels.BF16:
		return n >= halfPanelMinRows
	case kernels.F16:
		return n > 16 && k > halfKc
	}
	return false
}

// halfScratch is one worker's buffers for the panel path, grown on first
// use and reused (no allocation per call once grown).
type halfScratch struct {
	xp  []float32                  // one chunk of the activation rows, k-major panels of 16 rows
	wf  []float32                  // one block of weight rows widened, halfPanelKc floats each
	buf [8 * halfPanelMaxW]float32 // one group of widened weights (halfPanelWidenAVX2)
	// bufZ is one group of widened weights of halfPanelZWidenAVX512
	bufZ [16 * halfZMaxW1]float32
	acc  []float32 // two sets (even, odd chunks) of panel×row×16 accumulators
}

// prepareHalf makes sure t has a halfScratch for each of workers workers
// (called before a parallel op; the buffers grow inside the workers).
func (t *qmatTask) prepareHalf(workers int) {
	if len(t.hp) < workers {
		t.hp = append(t.hp, make([]halfScratch, workers-len(t.hp))...)
	}
}

// halfGrow returns s[:n], reallocated only when its capacity is short.
func halfGrow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// halfPanels computes weight rows [lo, hi) of an F16/BF16 MatMul against
// all t.n activation rows (t.n ≥ halfPanelMinRows) on the panel kernels.
func (t *qmatTask) halfPanels(lo, hi int, s *halfScratch) {
	for r := lo; r < hi; r += halfPanelRange {
		t.halfPanelRows(r, min(r+halfPanelRange, hi), s)
	}
}

// halfPanelRows is halfPanels on at most halfPanelRange weight rows.
func (t *qmatTask) halfPanelRows(lo, hi int, s *halfScratch) {
	w, x, out := t.w, t.x, t.out
	K := w.C
	K8 := K &^ 7
	rb := w.DT.RowBytes(K)
	bf := w.DT == kernels.BF16
	n := t.n
	G := (n + 15) / 16 // panels of 16 activation rows
	R := hi - lo
	s.acc = halfGrow(s.acc, 2*G*R*16)
	clear(s.acc)
	set := G * R * 16
	z := t.k.simd // AVX-512 kernels (halfz.go)
	if G == 1 {
		// one panel: all of K packed at once (16·K floats; by packPanels
		// once per MatMul, or here for other tasks), then each group of
		// weight rows runs through K, so that its rows stream from memory
		// one after another
		xp := t.xp
		if t.xpN != n {
			s.xp = halfGrow(s.xp, 16*K8)
			for kb := 0; kb < K8; kb += halfPanelKc {
				packRowPanels(s.xp[16*kb:], x.F, x.C, n, kb, min(halfPanelKc, K8-kb))
			}
			xp = s.xp
		}
		_ = xp[16*K8-1]
		maxW := halfPanelMaxW
		if z {
			maxW = halfZMaxW1
		}
		for o := lo; o < hi; {
			W := min(maxW, hi-o)
			_ = w.Q[(o+W-1)*rb+2*K8-1]
			for kb, ci := 0, 0; kb < K8; kb, ci = kb+halfPanelKc, ci+1 {
				kn := min(halfPanelKc, K8-kb)
				a := s.acc[(ci&1)*set+(o-lo)*16 : (ci&1)*set+(o-lo+W)*16]
				if z {
					halfPanelZWidenAVX512(bf, W, &xp[16*kb], &w.Q[o*rb+2*kb], rb, kn, &a[0], &s.bufZ[0])
				} else {
					halfPanelWidenAVX2(bf, W, &xp[16*kb], &w.Q[o*rb+2*kb], rb, kn, &a[0], &s.buf[0])
				}
			}
			o += W
		}
	}
	// two panels or more: a block of weight rows is widened once into wf
	// for all of them (halfPanelAVX2 on wf gives the sums of
	// halfPanelWidenAVX2 bit for bit)
	packed := t.xpN == n // packed once for the whole MatMul (packPanels)
	blocks := G > 1
	maxW := halfPanelMaxW
	if z {
		maxW = halfZMaxW2
	}
	if blocks {
		if !packed {
			s.xp = halfGrow(s.xp, G*16*halfPanelKc)
		}
		s.wf = halfGrow(s.wf, halfPanelNb*halfPanelKc)
	}
	for kb, ci := 0, 0; blocks && kb < K8; kb, ci = kb+halfPanelKc, ci+1 {
		kn := min(halfPanelKc, K8-kb)
		xp := s.xp
		if packed {
			xp = t.xp[G*16*kb : G*16*(kb+kn)]
		} else {
			packRowPanels(xp, x.F, x.C, n, kb, kn)
		}
		acc := s.acc[(ci&1)*set : (ci&1)*set+set]
		for ob := lo; ob < hi; ob += halfPanelNb {
			oe := min(ob+halfPanelNb, hi)
			for o := ob; o < oe; o++ {
				src := w.Q[o*rb+2*kb : o*rb+2*(kb+kn)]
				dst := s.wf[(o-ob)*kn : (o-ob+1)*kn]
				if bf {
					halfToF32BF16AVX2(&src[0], &dst[0], kn)
				} else {
					halfToF32F16AVX2(&src[0], &dst[0], kn)
				}
			}
			// the next block's chunk (the next rows at this chunk, or the
			// range's first rows at the next one) is fetched group by group
			// while this block computes, so that widening it later reads
			// from the caches more often than from memory
			pb, pk := oe, kb
			if pb >= hi {
				pb, pk = lo, kb+halfPanelKc
			}
			pe := min(pb+halfPanelNb, hi)
			for o := ob; o < oe; {
				W := min(maxW, oe-o)
				if r := pb + o - ob; pk < K8 && r < pe {
					prefetchRows(w.Q[r*rb+2*pk:], rb, min(W, pe-r), 2*min(halfPanelKc, K8-pk))
				}
				if z {
					halfPanelsZ(acc, xp, s.wf[(o-ob)*kn:], G, R, o-lo, W, kn)
					o += W
					continue
				}
				for g := 0; g < G; g++ {
					a := acc[(g*R+o-lo)*16 : (g*R+o-lo+W)*16]
					halfPanelAVX2(W, &xp[g*16*kn], &s.wf[(o-ob)*kn], kn, kn, &a[0])
				}
				o += W
			}
		}
	}
	a0, a1 := s.acc[:set], s.acc[set:2*set]
	// on AVX-512 the whole panels' first R&^15 rows are transposed 16 × 16
	// in registers (the same additions); the rest here
	mz, rz := 0, 0
	if z && R >= 16 {
		mz, rz = n&^15, R&^15
		for g := 0; g < mz/16; g++ {
			base := g * R * 16
			_ = out.F[(16*g+15)*out.C+lo+rz-1]
			halfPanelSumsAVX512(&out.F[16*g*out.C+lo], out.C, &a0[base], &a1[base], rz)
		}
	}
	for m := 0; m < n; m++ {
		g, j := m/16, m%16
		or := out.F[m*out.C+lo : m*out.C+hi]
		base := g * R * 16
		i0 := 0
		if m < mz {
			i0 = rz
		}
		for i := i0; i < len(or); i++ {
			or[i] = a0[base+i*16+j] + a1[base+i*16+j]
		}
	}
	if K8 < K {
		for m := 0; m < n; m++ {
			or := out.F[m*out.C+lo : m*out.C+hi]
			xr := x.F[m*x.C+K8 : m*x.C+K]
			for i := range or {
				o := lo + i
				or[i] += dotHalfGo(w.DT, w.Q[o*rb+2*K8:(o+1)*rb], xr)
			}
		}
	}
}

// packPanels packs the activations of the MatMul t is about to run into
// t.xp once, chunk after chunk of halfPanelKc values (chunk c at
// t.xp[G·16·c·halfPanelKc:], as packRowPanels writes it), when its batch
// runs on the panel path, so that the workers' ranges share one copy
// instead of each packing its own (t.xpN = n; matmulStored resets it).
// Other tasks (MatMulExperts' sub-tasks) pack per range.
func (t *qmatTask) packPanels() {
	t.xpN = 0
	w, x, n := t.w, t.x, t.n
	if !t.k.avx2 || n < 2 || w.C < 8 || !t.panels(w.DT, n, w.C) {
		return
	}
	K8 := w.C &^ 7
	G := (n + 15) / 16
	t.xp = halfGrow(t.xp, G*16*K8)
	for kb := 0; kb < K8; kb += halfPanelKc {
		kn := min(halfPanelKc, K8-kb)
		packRowPanels(t.xp[G*16*kb:G*16*(kb+kn)], x.F, x.C, n, kb, kn)
	}
	t.xpN = n
}

// packRowPanels writes values [kb, kb+kn) (kn a multiple of 8) of the n
// activation rows of x (xs floats apart) into xp as k-major panels of 16
// rows: panel g holds, for each k < kn, rows 16g..16g+15 at
// xp[(g·kn+k)·16 : …+16], rows past n as zeros. Whole groups of 8 rows
// are transposed by packPanel8AVX2.
func packRowPanels(xp, x []float32, xs, n, kb, kn int) {
	G := (n + 15) / 16
	for g := 0; g < G; g++ {
		p := xp[g*16*kn : (g+1)*16*kn]
		for h := 0; h < 16; h += 8 {
			m0 := g*16 + h
			if m0+8 <= n {
				_ = x[(m0+7)*xs+kb+kn-1]
				packPanel8AVX2(&x[m0*xs+kb], xs, kn, &p[h])
				continue
			}
			for j := h; j < h+8; j++ {
				m := g*16 + j
				if m >= n {
					for k := 0; k < kn; k++ {
						p[k*16+j] = 0
					}
					continue
				}
				xr := x[m*xs+kb : m*xs+kb+kn]
				for k, v := range xr {
					p[k*16+j] = v
				}
			}
		}
	}
}

// prefetchRows hints that n rows of w (stride bytes apart, the first at
// w[0]), nb bytes each, are read soon (PREFETCHT0:
// a hint, never a fault; the bounds are checked here).
func prefetchRows(w []byte, stride, n, nb int) {
	if n <= 0 || nb <= 0 {
		return
	}
	_ = w[(n-1)*stride+nb-1]
	prefetchRowsAVX512(uintptr(unsafe.Pointer(&w[0])), stride, n, nb)
}
