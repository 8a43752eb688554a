package cpu

import (
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// Load-time repack of Q4_K weights for the batch-1 row loop
// (k4rp_amd64.s): the quants of every 64-value group of a block are
// reordered so that one VPMADDUBSW of the low nibbles covers pairs of both
// 32-value sub-blocks (first sub-block in even words, second in odd) and
// the high nibbles the other pairs; the loop adds the two as words and
// applies both sub-block scales with one VPMADDWD. d, dmin and the 12
// scale bytes stay where the file has them; a repacked block has the
// file's 144 bytes. The activations are permuted the same way (once per
// step, permuteQ4KAct); each 32-bit lane of the loop's integer sums then
// holds exactly the products it holds in the file's layout, so results
// are bit-identical.

// permuteQ4KAct writes the Q8_K activation values src (a multiple of 64)
// to dst in the repacked loop's order: per 64 values, 32 in low-nibble
// order (values 4j, 4j+1, 32+4j, 33+4j for j < 8) then 32 in high-nibble
// order (4j+2, 4j+3, 34+4j, 35+4j).
func permuteQ4KAct(dst, src []int8) {
	for o := 0; o+64 <= len(src); o += 64 {
		s, d := src[o:o+64], dst[o:o+64]
		for j := 0; j < 8; j++ {
			d[4*j], d[4*j+1], d[4*j+2], d[4*j+3] = s[4*j], s[4*j+1], s[32+4*j], s[33+4*j]
			d[32+4*j], d[33+4*j], d[34+4*j], d[35+4*j] = s[4*j+2], s[4*j+3], s[34+4*j], s[35+4*j]
		}
	}
}

// q4kRows1R is q4kRows1 on repacked weights (quant.RepackQ4K) and
// permuted activations qp (permuteQ4KAct): out[i] = activation row times
// weight row i, two rows half the range apart per pass; an odd last row
// runs alone through the same loop (both its streams on that row).
// Results equal q4kRows1's on the file's rows bit for bit. Needs AVX2.
func q4kRows1R(w []byte, qp []int8, d []float32, bs []int16, nb int, out []float32) {
	rows := len(out)
	if rows == 0 || nb == 0 {
		return
	}
	rb := nb * 144
	_, _, _, _ = w[rows*rb-1], qp[nb*256-1], d[nb-1], bs[nb*16-1]
	if h := rows / 2; h > 0 {
		dotQ4KRows2RAVX2(&w[0], &qp[0], &d[0], &bs[0], nb, h, h*rb, &out[0])
	}
	if rows&1 != 0 {
		var two [2]float32
		dotQ4KRows2RAVX2(&w[(rows-1)*rb], &qp[0], &d[0], &bs[0], nb, 1, 0, &two[0])
		out[rows-1] = two[0]
	}
}

// k4rpMaxK is the longest Q4_K rows repackQ4K repacks (the leftover rows
// of qTiles unrepack one row at a time into a buffer of this size).
const k4rpMaxK = 32768

// repackQ4K replaces a Q4_K weight's blocks with a repacked copy
// (quant.RepackQ4K, the same number of bytes) when the AVX2 kernels serve
// it, and reports whether it did. A weight whose rows are read as rows
// (keepRows: the embedding) keeps the file's layout. The caller may then
// release the file's pages (the weight no longer reads them). Like an
// op, it runs on the backend's workers: not concurrently with other calls.
func (b *Backend) repackQ4K(h *kernels.Host, keepRows bool) bool {
	if !b.k.avx2 || h.DT != kernels.Q4_K || h.Repacked || keepRows || h.R < 1 ||
		h.C < quant.QKBlock || h.C%quant.QKBlock != 0 || h.C > k4rpMaxK {
		return false
	}
	n := h.R * kernels.Q4_K.RowBytes(h.C)
	if len(h.Q) < n {
		return false
	}
	var q []byte
	if !b.noHuge {
		q = b.huge.alloc(n)
	}
	if q == nil {
		q = make([]byte, n)
	}
	b.pool.parallel(n/quant.Q4KBlockBytes, 1, repackMinPar, &repackTask{dst: q, src: h.Q[:n], prefault: !b.noPrefault})
	h.Q, h.Repacked = q, true
	return true
}

// repackMinPar is the fewest Q4_K blocks (≈ 74 KB) repackQ4K splits
// across the workers.
const repackMinPar = 512

// repackTask repacks blocks [lo, hi) of src into dst (quant.RepackQ4K):
// the load's repack runs on every thread the backend has, each chunk
// reading the file's pages and writing (first touching) the copy's once.
type repackTask struct {
	dst, src []byte
	prefault bool // map dst's pages a step ahead of the writes (prefault)
}

func (t *repackTask) run(lo, hi, _ int) {
	const bb = quant.Q4KBlockBytes
	for s := lo; s < hi; s += repackStep {
		e := min(hi, s+repackStep)
		d := t.dst[s*bb : e*bb]
		if t.prefault {
			prefault(d)
		}
		quant.RepackQ4K(d, t.src[s*bb:e*bb])
	}
}

// repackStep is the blocks (≈ 288 KiB) repackTask maps (prefault) and
// then writes at a time, so that the zeroed lines are still in L2.
const repackStep = 2048

// permuteK fills a.qp with a.q's rows permuted for repacked Q4_K weights
// (permuteQ4KAct), unless it holds them for the rows last quantized.
func (a *actQ) permuteK() {
	if a.qpOK {
		return
	}
	if cap(a.qp) < len(a.q) {
		a.qp = make([]int8, len(a.q))
	}
	a.qp = a.qp[:len(a.q)]
	permuteQ4KAct(a.qp, a.q)
	a.qpOK = true
}

// q4kFileRow writes weight row o of a repacked Q4_K weight in the file's
// layout into buf and returns it, for the kernels that read that layout.
func q4kFileRow(w *kernels.Host, o int, buf *[k4rpMaxK / quant.QKBlock * quant.Q4KBlockBytes]byte) []byte {
	rb := kernels.Q4_K.RowBytes(w.C)
	quant.UnrepackQ4K(buf[:rb], w.Q[o*rb:(o+1)*rb])
	return buf[:rb]
}

// rowsKR is qTiles' part for groups of 8 activation rows [m0, m1) on a
// repacked Q4_K weight where dotQ4KTxNRAVX2 did not take them: the
// transposed tiles in pairs and singles (rowsKT, as for the file's layout
// below qTileMinRows rows), and any group they cannot take (activations
// without transposed rows) through the file layout's ×8 tile, one weight
// row unrepacked at a time.
func (t *qmatTask) rowsKR(ob, oe, m0, m1 int) {
	m := m0
	for m+16 <= m1 && t.rowsKT(ob, oe, m, 2) {
		m += 16
	}
	for m < m1 && t.rowsKT(ob, oe, m, 1) {
		m += 8
	}
	if m >= m1 {
		return
	}
	var buf [k4rpMaxK / quant.QKBlock * quant.Q4KBlockBytes]byte
	var acc [8]float32
	out := t.out
	for o := ob; o < oe; o++ {
		wr := q4kFileRow(t.w, o, &buf)
		for g := m; g < m1; g += 8 {
			t.tile8W(wr, g, &acc)
			for r, v := range acc {
				out.F[(g+r)*out.C+o] = v
			}
		}
	}
}

// leftoversR is qTiles' part for the activation rows past the groups of 8
// ([n8, t.n), 1–7 rows) on a repacked Q4_K weight: the repacked layout's
// batch-1 row loop (q4kRows1R, on the permuted activations the matmul's
// prologue made), once per leftover row over the weight rows [ob, oe)
// (qTiles' L1-sized block, which the next row's pass finds in cache).
// Results equal rowDot's on the file's rows bit for bit (rows1's
// contract), as the file layout's Q4_K leftovers are computed. (It used
// to unrepack every weight row into the file's layout on every call: a
// batch of 9–15 sequences cost 3× the CPU per token of 16.)
func (t *qmatTask) leftoversR(ob, oe, n8 int) {
	a, K, out := &t.act, t.w.C, t.out
	nb := K / quant.QKBlock
	rb := kernels.Q4_K.RowBytes(K)
	wr := t.w.Q[ob*rb : oe*rb]
	for m := n8; m < t.n; m++ {
		q4kRows1R(wr, a.qp[m*K:(m+1)*K], a.d[m*nb:(m+1)*nb], a.bs[m*K/16:(m+1)*K/16], nb, out.F[m*out.C+ob:m*out.C+oe])
	}
}
