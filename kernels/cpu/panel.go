package cpu

import (
	"fmt"

	"github.com/sluice-llm/sluice/kernels"
)

// Panel layout. Batched products (decode of many sequences, prefill) are
// computed as outer products rather than dot products: the weight matrix
// [N × K] is re-laid once, at load (PrepareMatMul), as panels of
// panelCols output columns, each holding for every k the panelCols weights
// of that k contiguously. A kernel call (panel_amd64.s) computes R ≤ 6
// activation rows × panelBlock columns: per k it loads 4 panel vectors,
// broadcasts x[r][k] and issues 4·R FMAs into 4·R accumulators. Compared
// with dot products along weight rows this needs no horizontal sums, reads
// each weight block from memory once per step as 4 sequential streams (the
// hardware prefetcher's best case) and reuses it from L2 for every row
// group, and keeps every output's summation order independent of the batch
// (so batched and solo runs give identical logits).
const (
	panelCols  = 16
	panelBlock = 64
	panelsPer  = panelBlock / panelCols
	panelMaxR  = 6
	// panelMChunk bounds the activation rows one pass over the weight
	// blocks takes (a multiple of panelMaxR).
	panelMChunk = 96
)

// packPanels returns w (rows × k, row-major) as panels: panel q holds, for
// each kk < k, the weights w[q*16+j][kk] for j < 16 (zero beyond rows).
// The panel count is rounded up to whole blocks of 4.
func packPanels(w []float32, rows, k int) []float32 {
	blocks := (rows + panelBlock - 1) / panelBlock
	p := make([]float32, blocks*panelsPer*k*panelCols)
	for q := 0; q < blocks*panelsPer; q++ {
		dst := p[q*k*panelCols : (q+1)*k*panelCols]
		for j := 0; j < panelCols; j++ {
			r := q*panelCols + j
			if r >= rows {
				break
			}
			src := w[r*k : (r+1)*k]
			for kk, v := range src {
				dst[kk*panelCols+j] = v
			}
		}
	}
	return p
}

// PrepareMatMul repacks a Q4_K weight for the AVX2 kernels (repackQ4K,
// k4rp.go) and packs an F32 weight into panels for the assembly kernels
// (see packPanels; AVX-512, or AVX2 and FMA), which then serve every MatMul with it, batch 1
// included. Without keepRows the row-major floats are dropped: a weight
// converted from F16 or BF16 at load is then held once, and a
// memory-mapped F32 one costs its packed copy (the mapping is page cache).
// Other weights, and every weight when the assembly kernels are off, are
// left alone.
func (b *Backend) PrepareMatMul(w kernels.Tensor, keepRows bool) error {
	h, ok := w.(*kernels.Host)
	if !ok {
		return fmt.Errorf("cpu: PrepareMatMul: %T is not a host tensor", w)
	}
	if b.repackQ4K(h, keepRows) || b.copyHuge(h) {
		return nil
	}
	if !(b.k.simd || b.k.avx2) || h.DT != kernels.F32 || h.P != nil || h.R < panelCols || h.C < 1 {
		return nil
	}
	if len(h.F) < h.R*h.C {
		return fmt.Errorf("cpu: PrepareMatMul: %d×%d weight holds %d floats", h.R, h.C, len(h.F))
	}
	h.P = packPanels(h.F, h.R, h.C)
	if !keepRows {
		h.F = nil
	}
	return nil
}

// panelTask computes blocks of panelBlock output columns from a packed
// weight.
type panelTask struct {
	k         kern
	out, x, w *kernels.Host
	n         int
	tile      [][]float32 // per worker: an R × panelBlock tile for the ragged last block
}

func (t *panelTask) run(lo, hi, wk int) {
	// Rows go in chunks of panelMChunk, so that a chunk's activations stay
	// in L2 while the blocks pass (prefill); decode batches are one chunk.
	for m0 := 0; m0 < t.n; m0 += panelMChunk {
		t.runRows(lo, hi, wk, m0, min(t.n, m0+panelMChunk))
	}
}

// runRows computes rows [m0, m1) of blocks [lo, hi).
func (t *panelTask) runRows(lo, hi, wk, m0, m1 int) {
	x, w, out := t.x, t.w, t.out
	K, xs, os := w.C, x.C, out.C
	blockFloats := panelsPer * K * panelCols
	for blk := lo; blk < hi; blk++ {
		col0 := blk * panelBlock
		valid := min(panelBlock, w.R-col0)
		p := w.P[blk*blockFloats : (blk+1)*blockFloats]
		for m := m0; m < m1; {
			r := panelRows(m1 - m)
			xr := x.F[m*xs : (m+r-1)*xs+K]
			if valid == panelBlock {
				o := out.F[m*os+col0 : (m+r-1)*os+col0+panelBlock]
				panelKernel(t.k, r, &xr[0], xs, &p[0], K*panelCols, K, &o[0], os, m == m0)
			} else {
				if t.tile[wk] == nil {
					t.tile[wk] = make([]float32, panelMaxR*panelBlock)
				}
				tile := t.tile[wk]
				panelKernel(t.k, r, &xr[0], xs, &p[0], K*panelCols, K, &tile[0], panelBlock, m == m0)
				for i := 0; i < r; i++ {
					copy(out.F[(m+i)*os+col0:(m+i)*os+col0+valid], tile[i*panelBlock:i*panelBlock+valid])
				}
			}
			m += r
		}
	}
}

// panelRows returns how many of the left rows the next kernel call takes:
// 6, 4, 2 or 1.
func panelRows(left int) int {
	r := min(left, panelMaxR)
	if r == 5 || r == 3 {
		r--
	}
	return r
}

// panelKernel dispatches to the r-row kernel (r is 6, 4, 2 or 1): the
// AVX-512 one where k.simd is set, else its AVX2 twin (f32panel_amd64.s);
// first selects the AVX-512 variant that prefetches the weight streams (a
// block's first row group, which reads them from memory).
func panelKernel(k kern, r int, x *float32, xs int, p *float32, ps, kk int, out *float32, os int, first bool) {
	if !k.simd {
		panelKernelAVX2(r, x, xs, p, ps, kk, out, os)
		return
	}
	if first {
		switch r {
		case 6:
			panel6pfAVX512(x, xs, p, ps, kk, out, os)
		case 4:
			panel4pfAVX512(x, xs, p, ps, kk, out, os)
		case 2:
			panel2pfAVX512(x, xs, p, ps, kk, out, os)
		default:
			panel1pfAVX512(x, xs, p, ps, kk, out, os)
		}
		return
	}
	switch r {
	case 6:
		panel6AVX512(x, xs, p, ps, kk, out, os)
	case 4:
		panel4AVX512(x, xs, p, ps, kk, out, os)
	case 2:
		panel2AVX512(x, xs, p, ps, kk, out, os)
	default:
		panel1AVX512(x, xs, p, ps, kk, out, os)
	}
}

// panelKernelAVX2 is panelKernel's AVX2 half; it has no prefetching
// variants (see asmgen/f32panel.go).
func panelKernelAVX2(r int, x *float32, xs int, p *float32, ps, kk int, out *float32, os int) {
	switch r {
	case 6:
		panel6AVX2(x, xs, p, ps, kk, out, os)
	case 4:
		panel4AVX2(x, xs, p, ps, kk, out, os)
	case 2:
		panel2AVX2(x, xs, p, ps, kk, out, os)
	default:
		panel1AVX2(x, xs, p, ps, kk, out, os)
	}
}

// matmulPanels runs MatMul for a packed weight.
func (b *Backend) matmulPanels(out, x, w *kernels.Host, n int) {
	t := &b.pt
	if t.tile == nil {
		t.tile = make([][]float32, b.pool.n)
	}
	t.k, t.out, t.x, t.w, t.n = b.k, out, x, w, n
	blocks := (w.R + panelBlock - 1) / panelBlock
	if n*w.R*w.C < 1<<15 {
		t.run(0, blocks, 0)
	} else {
		b.pool.parallel(blocks, 1, 0, t)
	}
	t.out, t.x, t.w = nil, nil, nil
}
