package cpu

import "github.com/sluice-llm/sluice/kernels"

// Ragged batches on the tiles of block-quantized weights.
//
// The tiles of qTiles take activation rows in groups of 8 (the Q4_K VNNI
// tiles pairs of groups, 16 rows); the rows past the last whole group used
// to take the batch-1 row loop (or the ×4 tiles) once per leftover row,
// each pass streaming the whole weight matrix again: decode of 15
// sequences cost twice the CPU per token of 16. A MatMul whose row count n
// is not a multiple of 8 now quantizes its n rows, appends zero rows up to
// the next multiple of 8 (actQ.padRows; a zero row has q, scale and sums 0,
// so its products are 0 and every weight row is read once per op for
// all rows), runs the tiles on the padded batch, writes its outputs to the
// backend's own rows (padOut, grown once) and copies the n real rows out.
//
// Which rows take which kernel (AVX2 machines; the plain build and other
// architectures keep the row loops). With r = n mod 8 the rows past the
// last whole group of 8 and p = padMinRows(dt):
//
//   - n = 1: the batch-1 row loops (rows1);
//   - r = 0: whole groups of 8 on the type's tiles (Q4_K on VNNI pairs
//     them into ×16 tiles);
//   - 0 < r < p: the groups of 8 on the tiles and the r rows on the row
//     loops, one pass per row (rowsEach, leftoversR for repacked Q4_K),
//     or for Q8_0/Q4_0/Q5_K/Q6_K from 4 rows on the ×4 tiles: one or
//     two rows cost less there than another group of 8 on a tile;
//   - r ≥ p: the batch padded with zero rows to a multiple of 8, all on
//     the tiles.
//
// p is 4 for Q4_K and Q6_K, 5 for Q5_K, Q8_0 and Q4_0 (BenchmarkPadRows:
// the padded op costs 0.4–0.9× the unpadded one for r ≥ p on the 1B
// shapes, while r = 1 costs 1.1–1.5× and r = 2 up to 2×).

// Numerics: a padded batch's rows get the tiles' results, bit for bit
// those of the same rows in a batch of whole groups (the rows of a group
// are independent and a zero row changes no other row's sums); the row
// loops they took before sum in another order and differ in the last bits
// (both within the numeric contract of qmat.go). Rows past the last group
// of 8 now agree with the rows of the groups whenever r ≥ padMinRows(dt).

// padMinRows is the fewest rows past the last whole group of 8 that padTo
// pads for weights of type dt (measured with BenchmarkPadRows on an
// Emerald Rapids VM; docs/BENCHMARKS.md, "i17pad"): fewer cost less on
// the row loops (or the ×4 tiles) than another group of 8 on a tile.
func padMinRows(dt kernels.DType) int {
	switch dt {
	case kernels.Q4_K, kernels.Q6_K:
		return 4
	case kernels.Q5_K, kernels.Q8_0, kernels.Q4_0:
		return 5
	}
	return 0
}

// padTo returns how many activation rows a MatMul of n rows on w runs its
// tiles on: n, or n rounded up to a multiple of 8 where the type's ×8
// tiles serve it and n mod 8 ≥ padMinRows (see the rule above; b.padMin
// overrides the minimum).
func (b *Backend) padTo(w *kernels.Host, n int) int {
	return padTo(b.k, b.padMin, w, n)
}

// padTo is Backend.padTo for kernels k and the override padMin.
func padTo(k kern, padMin int, w *kernels.Host, n int) int {
	if n%8 == 0 || !k.avx2 || !has8(w.DT) {
		return n
	}
	mn := padMinRows(w.DT)
	if padMin != 0 {
		mn = padMin
	}
	_, blk := quantized(w.DT)
	if mn <= 0 || n%8 < mn || blk == 0 || w.C < blk || w.C%blk != 0 {
		return n
	}
	return (n + 7) &^ 7
}

// padBuf is a worker's copy of one expert group's quantized rows padded
// with zero rows, and the padded batch's output rows (MatMulExperts pads
// each group as a MatMul of its rows alone would: padTo).
type padBuf struct {
	q   []int8
	d   []float32
	bs  []int16
	out []float32
}

// rows sets a to rows [s, e) of src padded with zero rows to np rows, in
// p's buffers (grown once), and returns the np-row output view for it.
func (p *padBuf) rows(a, src *actQ, s, e, np, oc int) kernels.Host {
	K := src.k
	nb := K / src.blk
	p.q, p.d, p.bs, p.out = sized(p.q, np*K), sized(p.d, np*nb), sized(p.bs, np*K/16), sized(p.out, np*oc)
	n := e - s
	q, d, bs := p.q, p.d, p.bs
	copy(q, src.q[s*K:e*K])
	clear(q[n*K:])
	copy(d, src.d[s*nb:e*nb])
	clear(d[n*nb:])
	copy(bs, src.bs[s*K/16:e*K/16])
	clear(bs[n*K/16:])
	*a = actQ{q: q, d: d, bs: bs, blk: src.blk, k: K, n: np, nx: n, tile8Act: a.tile8Act.emptied()}
	return kernels.Host{R: np, C: oc, DT: kernels.F32, F: p.out}
}

// sized returns s with length n, reallocated (contents dropped) only when
// its capacity is short: the kernels' scratch buffers grow once and are
// reused.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
