package cpu

import "github.com/sluice-llm/sluice/kernels"

// F16/BF16 batches on AVX-512 (halfz_amd64.s). Where the CPU has AVX-512
// (kern.simd), every F16 and BF16 batch of halfPanelZMinRows rows or more
// runs on the panel path of halfpanel.go, one panel of 16 activation rows
// being exactly one zmm: the kernels hold P·W sums of 16 lanes (one or two
// panels × up to 16 or 12 weight rows) in Z registers and add one fused
// multiply-add per product in k order, into the same even/odd-chunk
// accumulators as the AVX2 panels, so the results equal the AVX2 panel
// path's bit for bit. One panel (8–16 rows) widens as it goes, 16 values
// of each of 16 rows at a time, every row streaming through K in order
// (halfPanelZWidenAVX512); two panels or more run on blocks of widened
// weights, two panels per call (halfPanelZAVX512).
//
// Per step of k a one-panel kernel issues one 64-byte load and W FMAs of
// 16 lanes, each FMA broadcasting its weight from the widened block itself
// (embedded broadcast: one fused µop, so the out-of-order window holds
// twice the steps and reaches further ahead into the streamed weights); a
// two-panel one 2 loads, W broadcasts and 2·W FMAs. The register tiles of
// half.go (AVX2) keep the smaller batches.

// halfPanelZMinRows is the smallest batch that runs on the AVX-512 panels;
// fewer rows run on the AVX2 register tiles (half.go).
const halfPanelZMinRows = 8

// panels reports whether t's batch of n rows on weights of type dt (F16 or
// BF16) with k values per row runs on the panel path: on AVX-512 every
// batch of halfPanelZMinRows rows or more, elsewhere usePanels.
func (t *qmatTask) panels(dt kernels.DType, n, k int) bool {
	if t.k.simd && (dt == kernels.F16 || dt == kernels.BF16) {
		return n >= halfPanelZMinRows
	}
	return usePanels(dt, n, k)
}

// halfPanelsZ adds the products of W widened weight rows (wf, kn floats
// each) with the G panels of xp (16·kn floats each) to acc, whose panel g
// holds R rows of 16 sums and whose row o0 takes weight row 0: two panels
// per kernel call, the last one alone where G is odd.
func halfPanelsZ(acc, xp, wf []float32, G, R, o0, W, kn int) {
	_ = wf[W*kn-1]
	for g := 0; g < G; g += 2 {
		p := min(2, G-g)
		_ = xp[(g+p)*16*kn-1]
		a := acc[(g*R+o0)*16:]
		_ = a[(p-1)*R*16+W*16-1]
		halfPanelZAVX512(p, W, &xp[g*16*kn], 16*kn, &wf[0], kn, kn, &a[0], R*16)
	}
}
