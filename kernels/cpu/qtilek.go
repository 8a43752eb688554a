package cpu

// The Q4_K ×8 tile folds each super-block's mins, Σ_j m_j·(Σx)_j over its 8
// sub-blocks of 32 values, from the activation rows' 32-value sums. The
// first ×8 tile (dotQ4Kx8AVX2) formed those sums from the 16-value sums
// (actQ.bs) with VPHADDW per weight row and super-block, 4 times per call
// and super-block: ≈ a quarter of the tile's time outside the multiplies
// (docs/bench/batch-tiles.md, "Where the ×8 tile loses"). pairs8 forms
// them once per MatMul, in the layout VPHADDW left them in, so
// dotQ4Kx8PAVX2 (qtilek_amd64.s) computes the same integers and floats in
// the same order: its results equal dotQ4Kx8AVX2's bit for bit.

// pairs8 fills a.bp from a.bs for activations in blocks of 256 (the
// k-quants): for each group g of 8 rows and super-block b, the 64 words at
// (g·nb+b)·64 hold, for the row pairs (0,1), (2,3), (4,5), (6,7) in turn,
// [r s0-s3, r' s0-s3, r s4-s7, r' s4-s7] with s_j the sum of the
// super-block's 16-value sums 2j and 2j+1 (int16, wrapping as VPHADDW
// does). Rows beyond the last full group have none; other block sizes
// leave a.bp empty.
func (a *actQ) pairs8() {
	a.bp = a.bp[:0]
	if a.blk != 256 || a.k < 256 {
		return
	}
	nb := a.k / 256
	g := a.n / 8
	need := g * nb * 64
	if cap(a.bp) < need {
		a.bp = make([]int16, need)
	}
	a.bp = a.bp[:need]
	bsRow := a.k / 16
	for gi := 0; gi < g; gi++ {
		for b := 0; b < nb; b++ {
			v := a.bp[(gi*nb+b)*64 : (gi*nb+b+1)*64]
			for p := 0; p < 4; p++ {
				for i, row := range [2]int{8*gi + 2*p, 8*gi + 2*p + 1} {
					s := a.bs[row*bsRow+16*b : row*bsRow+16*b+16]
					for j := 0; j < 4; j++ {
						v[16*p+4*i+j] = s[2*j] + s[2*j+1]
						v[16*p+8+4*i+j] = s[8+2*j] + s[8+2*j+1]
					}
				}
			}
		}
	}
}

// bp8 returns the 32-value sums of the group of 8 rows starting at row m
// (m a multiple of 8) for a reduction of nb super-blocks, or nil where
// pairs8 made none (the tile then forms them itself).
func (a *actQ) bp8(m, nb int) []int16 {
	g := m / 8
	if nb == 0 || len(a.bp) < (g+1)*nb*64 {
		return nil
	}
	return a.bp[g*nb*64 : (g+1)*nb*64]
}

// kScaleBytes is the size of the buffer of unpacked Q4_K scales (64 bytes
// per super-block) that rows8K keeps for one block of weight rows: blocks
// hold at most qTileL1 bytes of weights, 144 per super-block, so any block
// of more than one row fits; a single row longer than that takes rows8.
const kScaleBytes = (qTileL1/144 + 1) * 64

// rows8K sets the products of Q4_K weight rows [ob, oe) with the activation
// rows' groups of 8 in [m0, m1) with dotQ4Kx8SAVX2: the block's scales,
// mins, d and dmin unpacked once (q4kScalesAVX2) into sc for all the
// groups, where dotQ4Kx8AVX2 unpacked them per weight row and group. It
// reports false, doing nothing, where the block's scales do not fit sc or
// the activations have no precomputed 32-value sums.
func (t *qmatTask) rows8K(ob, oe, m0, m1 int, sc *[kScaleBytes]byte) bool {
	w, a, out := t.w, &t.act, t.out
	K := w.C
	nb := K / 256
	if (oe-ob)*nb*64 > len(sc) || a.bp8(m1-8, nb) == nil {
		return false
	}
	rb := w.DT.RowBytes(K)
	wq := w.Q[ob*rb : oe*rb]
	q4kScalesAVX2(&wq[0], rb, oe-ob, nb, &sc[0])
	var acc [8]float32
	var o8 [8][]float32
	for m := m0; m < m1; m += 8 {
		xq := a.q[m*K : (m+8)*K]
		xd8 := a.d8[(m/8)*nb*16 : (m/8+1)*nb*16]
		bp := a.bp8(m, nb)
		for r := range o8 {
			o8[r] = out.F[(m+r)*out.C+ob : (m+r)*out.C+oe]
		}
		for i := range oe - ob {
			dotQ4Kx8SAVX2(&wq[i*rb], &xq[0], K, &xd8[0], &bp[0], &sc[i*nb*64], nb, &acc)
			for r := range o8 {
				o8[r][i] = acc[r]
			}
		}
	}
	return true
}
