package cpu

import "github.com/sluice-llm/sluice/kernels"

var _ kernels.SiLUMulMatMuler = (*Backend)(nil)

// siluPackCols is the width of one unit of the fused SwiGLU product's op
// (siluPackTask): a multiple of 16, so that every unit runs whole vectors
// of the SiLU kernel, as SiLUMul's chunks of 1024 do.
const siluPackCols = 256

// SiLUMulMatMul implements kernels.SiLUMulMatMuler. Where the down
// projection takes the F16/BF16 one-panel path (2–16 rows, weights in
// their stored encoding, AVX2 or AVX-512), the product runs as one
// parallel op over column ranges that also writes the panel MatMul would
// pack on the calling thread (packPanels, ≈ 60 µs per layer at 16 rows
// of 8192 values); MatMul then starts from it. Elsewhere it is SiLUMul
// then MatMul. Either way the values are theirs bit for bit: the SiLU
// kernel is element-wise and runs whole vectors in both splits (rows of
// a multiple of 16 values), and packing copies.
func (b *Backend) SiLUMulMatMul(out, gate, up, w kernels.Tensor, n int) {
	g, u, wh, o := gate.(*kernels.Host), up.(*kernels.Host), w.(*kernels.Host), out.(*kernels.Host)
	K := wh.C
	t := &b.qm
	if !b.siluPacks(g, u, wh, n) {
		b.SiLUMul(gate, gate, up, n)
		b.MatMul(out, gate, w, n)
		return
	}
	t.k = b.k
	t.xp = halfGrow(t.xp, 16*K)
	sp := &b.silup
	sp.k, sp.g, sp.u, sp.xp, sp.n = b.k, g, u, t.xp, n
	b.pool.parallel(K/siluPackCols, 1, 2, sp)
	sp.g, sp.u, sp.xp = nil, nil, nil
	b.matmulStoredPacked(o, g, wh, n)
}

// siluPackTask computes gate = silu(gate)·up on column ranges of n ≤ 16
// rows and packs each range as packRowPanels does for one panel: unit i
// covers columns [i·siluPackCols, (i+1)·siluPackCols) of every row.
type siluPackTask struct {
	k    kern
	g, u *kernels.Host
	xp   []float32
	n    int
}

func (t *siluPackTask) run(lo, hi, _ int) {
	c0, c1 := lo*siluPackCols, hi*siluPackCols
	g, u, gs, us := t.g.F, t.u.F, t.g.C, t.u.C
	for m := 0; m < t.n; m++ {
		t.k.siluMul(g[m*gs+c0:m*gs+c1], g[m*gs+c0:m*gs+c1], u[m*us+c0:m*us+c1])
	}
	packRowPanels(t.xp[16*c0:16*c1], g, gs, t.n, c0, c1-c0)
}

// siluPacks reports whether SiLUMulMatMul packs the down projection's
// panel in its product's op: F16/BF16 weights in their stored encoding
// on the one-panel path of 2–16 rows, rows of a multiple of siluPackCols
// values, and more than one thread.
func (b *Backend) siluPacks(g, u, w *kernels.Host, n int) bool {
	K := w.C
	b.qm.k = b.k // panels reads the kernels MatMul will run
	return w.P == nil && (w.DT == kernels.F16 || w.DT == kernels.BF16) && b.k.avx2 && n >= 2 && n <= 16 &&
		K%siluPackCols == 0 && g.C == K && u.C == K && b.pool.n >= 2 && b.qm.panels(w.DT, n, K) && b.padTo(w, n) == n
}
