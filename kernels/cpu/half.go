package cpu

import "github.com/sluice-llm/sluice/kernels"

// Batches of activation rows on F16 and BF16 weights (read in place; see
// the numeric contract in qmat.go). One activation row (decode) is
// memory-bound and runs on halfRows1 (rows1): three rows a third of the
// range apart per pass (halfrow_amd64.s), equal bit for bit to the one-row
// loops of qdotgen_amd64.s that rowDot uses. A batch of rows (prefill, many
// sequences) is compute-bound and runs on the register tiles of
// half_amd64.s, blocked for the caches:
//
//	for each block of halfNc weight rows (in L2 across the batch):
//	  for each halfKc-value slice of K:
//	    for each group of halfM activation rows (their slice in L1):
//	      for each group of halfW weight rows: halfM×halfW tile, added to out
//
// A tile widens each 8-weight chunk once and multiplies it with halfM
// activation rows from registers; the sums of the slices of K add up in
// out, which is cleared first. BF16 batches of halfPanelMinRows rows or
// more, and F16 batches of over 16 rows with K past halfKc, run on the
// panel path of halfpanel.go instead (usePanels).

// The main tile shape and the cache blocking of halfBatch.
const (
	halfM  = 4    // activation rows per tile
	halfW  = 3    // weight rows per tile
	halfKc = 2048 // values of K per slice (paired runs: 512 and 1024 were slower, 4096 and 8192 no faster)
	halfNc = 48   // weight rows per block (a multiple of halfW): 192 KiB of slices in L2
)

// halfBatch computes weight rows [lo, hi) of an F16/BF16 MatMul against
// all t.n activation rows with the register tiles.
func (t *qmatTask) halfBatch(lo, hi int) {
	w, x, out := t.w, t.x, t.out
	K := w.C
	K8 := K &^ 7
	rb := w.DT.RowBytes(K)
	bf := w.DT == kernels.BF16
	n := t.n
	for ob := lo; ob < hi; ob += halfNc {
		oe := min(ob+halfNc, hi)
		for m := 0; m < n; m++ {
			clear(out.F[m*out.C+ob : m*out.C+oe])
		}
		for kb := 0; kb < K8; kb += halfKc {
			kn := min(halfKc, K8-kb)
			for m := 0; m < n; {
				M := min(halfM, n-m)
				_ = x.F[(m+M-1)*x.C+kb+kn-1]
				_ = out.F[(m+M-1)*out.C+oe-1]
				for o := ob; o < oe; {
					W := min(halfW, oe-o)
					_ = w.Q[(o+W-1)*rb+2*(kb+kn)-1]
					halfTileAVX2(bf, M, W, &w.Q[o*rb+2*kb], rb, &x.F[m*x.C+kb], x.C, kn, &out.F[m*out.C+o], out.C)
					o += W
				}
				m += M
			}
		}
		if K8 < K {
			for m := 0; m < n; m++ {
				xr := x.F[m*x.C+K8 : m*x.C+K]
				for o := ob; o < oe; o++ {
					out.F[m*out.C+o] += dotHalfGo(w.DT, w.Q[o*rb+2*K8:(o+1)*rb], xr)
				}
			}
		}
	}
}

// halfRows1 sets out[i] = x · row i of the F16 (or, where bf16 is set,
// BF16) rows w (len(out) rows of k values, k a multiple of 32; no rows or k = 0 do
// nothing). The rows
// are cut into three contiguous thirds streamed side by side, three rows
// per pass (halfrow_amd64.s: one core keeps three memory streams in
// flight, which reads about 1.5× the bytes per CPU-second of one stream);
// the rows left over run through the one-row loop. Every result equals
// the one-row loop's bit for bit.
func halfRows1(bf16 bool, w []byte, x []float32, k int, out []float32) {
	rows := len(out)
	if rows == 0 || k == 0 {
		return
	}
	rb := 2 * k
	_, _ = w[rows*rb-1], x[k-1]
	h := rows / 3
	if h > 0 {
		if bf16 {
			dotBF16Rows3AVX2(&w[0], &x[0], k, h, &out[0])
		} else {
			dotF16Rows3AVX2(&w[0], &x[0], k, h, &out[0])
		}
	}
	if r := rows - 3*h; r > 0 {
		if bf16 {
			dotBF16RowsAVX2(&w[3*h*rb], &x[0], k, r, &out[3*h])
		} else {
			dotF16RowsAVX2(&w[3*h*rb], &x[0], k, r, &out[3*h])
		}
	}
}
