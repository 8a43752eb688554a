package cpu

import "github.com/sluice-llm/sluice/kernels"

// Batched products (prefill, and decode of many sequences) on block-quantized
// weights: the ×4 integer tiles (one decoded weight vector feeds 4 activation
// rows from registers) run over blocks of weight rows, qTileL1 bytes at a
// time, so that every group of 4 activation rows meets every weight row of
// the block while the block stays in L1: the activations are read from L2
// once per block of weight rows, not once per weight row.
//
// (Cutting the reduction into spans as well, so that 4 activation rows of
// a span fit in L1 whatever the row length, was measured and did not pay:
// at 16 rows it made the 2048×8192 products up to 40 % slower — the weight
// rows' pieces no longer stream contiguously — and at 128 rows it changed
// nothing beyond the noise. See docs/bench/real-shapes.md, "batches".)

const (
	// qTileL1 is the L1 budget in bytes of one block of weight rows (the
	// activation rows take the rest of a 32 KiB L1).
	qTileL1 = 16 << 10
	// qTileMinRows is the batch from which weight rows are blocked: the
	// gain was measured at 128 rows; at 16 the blocks showed none (and
	// 16 rows of activations fit L1 and L2 anyway).
	qTileMinRows = 32
	// qTileFewRows is the most weight rows per block below qTileMinRows
	// rows. Blocks of one row (each a tile call per group of 8 rows and
	// the code around it) were 20–40 % slower at 16 rows than blocks of 8
	// with rows8's one setup per block (docs/bench/batch-tiles.md).
	qTileFewRows = 8
	// qTileL2 is the L2 budget in bytes of the int8 activation rows that
	// the blocks of weight rows meet in turn (half of a 512 KiB L2).
	qTileL2 = 256 << 10
)

// qTiles computes weight rows [lo, hi) of a Q8_0, Q4_0, Q4_K, Q5_K or Q6_K
// weight against all t.n activation rows (t.n ≥ 4) with the ×8 tiles
// (qtile8.go; for Q4_K the tiles on transposed super-blocks, of qtilekt.go
// below qTileMinRows rows and ktnMinK values and of qtilektn.go otherwise,
// else those of qtilek.go; for Q6_K from q6tnMinRows rows the tile on
// transposed super-blocks of q6tilen.go; for Q5_K on VNNI from q5tnMinRows
// rows that of q5v.go; for Q8_0 from qTileMinRows rows and q8PairMinK values the 2×4
// tile of q8tile.go, weight rows in pairs) and the ×4 tiles in blocks of
// weight rows, the activation rows left over (t.n mod 4) one by one. (The
// 2×4 Q4_K tile, which the 8192-value reductions took at 32 rows or more,
// lost to qtilek.go's ×8 tile: docs/bench/batch-tiles.md.)
func (t *qmatTask) qTiles(lo, hi int) {
	w, out, a := t.w, t.out, &t.act
	K := w.C
	rb := w.DT.RowBytes(K)
	rows := max(1, qTileL1/rb)
	if t.n < qTileMinRows {
		// few rows: blocks of a few weight rows, which stream once,
		// contiguously, and stay in L1 across the groups of rows
		rows = min(rows, qTileFewRows)
	}
	ktn := t.takesKTN()
	if ktn {
		// dotQ4KTxNAVX2 (rowsKTN) reads a super-block's activations into
		// L1 once for all of a block's weight rows, which stream: blocks
		// of ktnRows rows at any row length (at 8192 values 16 rows were
		// faster than qTileL1's 3: docs/bench/batch-tiles.md)
		rows = ktnRows
	}
	q6tn := t.takesQ6TN()
	q5tn := t.takesQ5TN() // Q5_K on VNNI (q5v.go)
	if q6tn || q5tn {
		// dotQ6KTxNAVX2 (rowsQ6TN), as dotQ4KTxNAVX2: blocks of ktnRows
		rows = ktnRows
	}
	n8 := 0
	if has8(w.DT) && K >= a.blk && len(a.d8) >= t.n/8*(K/a.blk)*16 &&
		(w.DT != kernels.Q4_0 || len(a.s8) >= t.n/8*(K/a.blk)*8) {
		// (activations without their ×8 scales take the ×4 tiles)
		n8 = t.n &^ 7
	}
	n4 := n8 + (t.n-n8)&^3
	if w.DT == kernels.Q4_K {
		// Q4_K's leftover rows one by one (rowDot; leftoversR on repacked
		// weights), so the file's layout and the repacked one agree bit
		// for bit: the ×4 tile's sums differ from rowDot's in the last bit
		n4 = n8
	}
	q8p := q8Pair(w.DT, K, t.n, n8) // Q8_0: the 2×4 tile (q8tile.go)
	if q8p {
		// weight rows in pairs: blocks of an even count
		rows = max(2, rows&^1)
	}
	var acc [4]float32
	var ksc [kScaleBytes]byte                  // Q4_K scales of a block of weight rows (rows8K)
	var kacc [ktnRows * ktnGroups * 16]float32 // dotQ4KTxNAVX2's accumulators (rowsKTN)
	// the groups of 8 rows in spans whose int8 activations fit L2, each
	// span meeting every block of weight rows: a block reads its span's
	// activations from L2, not from L3 (8192-value reductions at 128 rows
	// are 1 MiB of them). Q4_K blocks unpack their scales once for all
	// the groups (rows8K) from qTileMinRows rows; below, with 1–3 groups,
	// unpacking first was slower (docs/bench/batch-tiles.md).
	span := max(8, qTileL2/K&^7)
	g8 := n8 // rows left to the span loop below
	if w.DT == kernels.Q6_K && n8 > 0 && t.n >= q6UMinRows && !q6tn {
		// Q6_K: weight rows unpacked once per block and span (q6tile.go)
		t.q6Blocks(lo, hi, n8, span)
		g8 = 0
	}
	if n8 > 0 && t.takesQ8Z() {
		// Q8_0 and Q4_0 on AVX-512 VNNI: 4 weight rows × 16 activation
		// rows (q8z.go)
		t.zBlocks(lo, hi, n8, span)
		g8 = 0
	}
	for m0 := 0; m0 < g8; m0 += span {
		m1 := min(m0+span, g8)
		for ob := lo; ob < hi; ob += rows {
			oe := min(ob+rows, hi)
			switch {
			case t.rowsQ8T(ob, oe, m0, m1): // Q8_0 on VNNI (q8vnni.go)
			case t.rowsQ4T(ob, oe, m0, m1): // Q4_0 on VNNI (q8vnni.go)
			case q8p:
				t.q8Pairs(ob, oe, m0, m1)
			case ktn && t.rowsKTN(ob, oe, m0, m1, &kacc):
			case q6tn && t.rowsQ6TN(ob, oe, m0, m1, &kacc):
			case q5tn && t.rowsQ5TN(ob, oe, m0, m1, &kacc):
			case w.Repacked:
				// repacked Q4_K (k4rp.go): the transposed tiles, else
				// the file's layout one weight row at a time
				t.rowsKR(ob, oe, m0, m1)
			case w.DT == kernels.Q4_K && t.n >= qTileMinRows && t.rows8K(ob, oe, m0, m1, &ksc):
			default:
				m := m0
				if w.DT == kernels.Q4_K {
					// the tiles on transposed super-blocks (qtilekt.go),
					// groups of 8 in pairs
					for m+16 <= m1 && t.rowsKT(ob, oe, m, 2) {
						m += 16
					}
					for m < m1 && t.rowsKT(ob, oe, m, 1) {
						m += 8
					}
				}
				for ; m < m1; m += 8 {
					t.rows8(ob, oe, m)
				}
			}
		}
	}
	for ob := lo; ob < hi && w.Repacked && n8 < t.n; ob += rows {
		t.leftoversR(ob, min(ob+rows, hi), n8)
	}
	for ob := lo; ob < hi && !w.Repacked; ob += rows {
		oe := min(ob+rows, hi)
		for m := n8; m < n4; m += 4 {
			for o := ob; o < oe; o++ {
				t.tile4(o, m, 0, K, &acc)
				for r := 0; r < 4; r++ {
					out.F[(m+r)*out.C+o] = acc[r]
				}
			}
		}
		for m := n4; m < t.n; m++ {
			xr := t.x.F[m*t.x.C : m*t.x.C+K]
			for o := ob; o < oe; o++ {
				out.F[m*out.C+o] = t.k.rowDot(w.DT, w.Q[o*rb:(o+1)*rb], xr, a, m)
			}
		}
	}
}

// tile4 sets acc to the products of weight row o with activation rows
// m..m+3 over values [k0, k0+kn) of the reduction.
func (t *qmatTask) tile4(o, m, k0, kn int, acc *[4]float32) {
	rb := t.w.DT.RowBytes(t.w.C)
	t.tile4W(t.w.Q[o*rb:(o+1)*rb], m, k0, kn, acc)
}

// tile4W is tile4 on the weight row wr (in t.w's encoding and the file's
// layout).
func (t *qmatTask) tile4W(row []byte, m, k0, kn int, acc *[4]float32) {
	w, a := t.w, &t.act
	K := w.C
	nbRow := K / a.blk // activation scales per row
	b0, nb := k0/a.blk, kn/a.blk
	wr := row[w.DT.RowBytes(k0):]
	_ = wr[w.DT.RowBytes(kn)-1]
	xq := a.q[m*K+k0 : (m+3)*K+k0+kn]
	xd := a.d[m*nbRow+b0 : (m+3)*nbRow+b0+nb]
	switch w.DT {
	case kernels.Q8_0:
		dotQ8_0x4AVX2(&wr[0], &xq[0], K, &xd[0], nbRow, nb, acc)
		return
	case kernels.Q4_0:
		dotQ4_0x4AVX2(&wr[0], &xq[0], K, &xd[0], nbRow, nb, acc)
		return
	}
	bs := a.bs[m*K/16+k0/16 : (m+3)*K/16+(k0+kn)/16]
	switch w.DT {
	case kernels.Q4_K:
		dotQ4Kx4AVX2(&wr[0], &xq[0], K, &xd[0], nbRow, &bs[0], K/16, nb, acc)
	case kernels.Q5_K:
		dotQ5Kx4AVX2(&wr[0], &xq[0], K, &xd[0], nbRow, &bs[0], K/16, nb, acc)
	default:
		dotQ6Kx4AVX2(&wr[0], &xq[0], K, &xd[0], nbRow, &bs[0], K/16, nb, acc)
	}
}
