package cpu

import "github.com/sluice-llm/sluice/kernels"

// F16/BF16 batches of 2–7 activation rows on AVX-512 (halfs_amd64.s).
// Fewer rows than one panel of 16 (halfPanelZMinRows) leave most lanes of
// a panel idle, so these batches keep k in the lanes, as the AVX2 register
// tiles of half.go do, at twice their width: a halfSmall tile holds all
// t.n activation rows × up to halfSMaxW(t.n) weight rows in zmm
// accumulators and runs through all of K in one call, widening each 16
// weights of a row once for every activation row. Each weight row is read
// once per MatMul (the AVX2 tiles read it twice past 4 rows) and no
// partial sums go through out.
//
// Order: lane j of an output's accumulator adds the products of k ≡ j mod
// 16 in k order (the AVX2 tiles: k ≡ j mod 8, in slices of halfKc values
// added in out), then the 16 lanes are summed as (l_j + l_{j+8}), then 4,
// 2 and 1 lanes apart; values of K past the last multiple of 8 are added
// last (dotHalfGo), as in halfBatch. The result is the float32-accumulated
// product of the numeric contract (qmat.go), differing from the AVX2
// tiles' in the last bits only; every tile shape and thread range gives the
// same bits.

// halfSmallZ computes weight rows [lo, hi) of an F16/BF16 MatMul against
// its t.n activation rows (2 to 7) with the halfSmall tiles.
func (t *qmatTask) halfSmallZ(lo, hi int) {
	w, x, out := t.w, t.x, t.out
	K := w.C
	K8 := K &^ 7
	rb := w.DT.RowBytes(K)
	bf := w.DT == kernels.BF16
	n := t.n
	Wm := halfSMaxW(n)
	_ = x.F[(n-1)*x.C+K-1]
	_ = out.F[(n-1)*out.C+hi-1]
	for o := lo; o < hi; {
		W := min(Wm, hi-o)
		_ = w.Q[(o+W)*rb-1]
		halfSmallAVX512(bf, n, W, &w.Q[o*rb], rb, &x.F[0], x.C, K8, &out.F[o], out.C)
		o += W
	}
	if K8 < K {
		for m := 0; m < n; m++ {
			xr := x.F[m*x.C+K8 : m*x.C+K]
			for o := lo; o < hi; o++ {
				out.F[m*out.C+o] += dotHalfGo(w.DT, w.Q[o*rb+2*K8:(o+1)*rb], xr)
			}
		}
	}
}
