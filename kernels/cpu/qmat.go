package cpu

import (
	"bytes"
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// Matrix products on weights in their stored encodings (F16, BF16, Q8_0,
// Q4_0, Q4_K, Q5_K, Q6_K), read in place: no widened or re-quantized copy
// (Q4_K matrix weights on AVX2 are repacked at load into the same number
// of bytes, replacing the file's copy: k4rp.go).
//
// Numeric contract:
//
//   - F16 and BF16 weights are widened to float32 in registers and
//     multiplied with the float32 activations (FMA, float32 accumulators):
//     the result equals the reference product on the decoded weights to
//     float32 rounding.
//   - Block-quantized weights meet activations quantized to int8 once per
//     MatMul (for every number of rows: prefill as decode), exactly as
//     ggml quantizes them (the vec_dot_type of each weight type): for Q8_0
//     and Q4_0 in blocks of 32 as quantize_row_q8_0 (scale
//     float16(amax/127), q = round-half-even(x·127/amax)), for the k-quants
//     Q4_K, Q5_K and Q6_K in blocks of 256 as quantize_row_q8_K (scale
//     1/(127/amax), the same q) with the sums of every 16 q (actBlock;
//     table tests against ggml's own output in testdata). The layout is
//     int8 q, one float32 scale per block, int16 sums; where ggml's Q8_K
//     has the opposite sign (its largest value positive) q, scale and sums
//     are all negated, which leaves every product unchanged bit for bit.
//     Every block product is an exact integer dot product; the rounding
//     happens once per block (or per super-block), where the integer sum is
//     converted to float32 and multiplied by the weight's scales (and the
//     k-quants' mins) and d. The activation rounding adds at most
//     0.57·d·|w_j| per element, i.e. |error| ≤ Σ_blocks 0.57·d · Σ_j |w_j|
//     for one output, typically well below 1 % of the result (tests check
//     that bound).
//   - The plain-Go kernels also sum in ggml's AVX2 order (8 lanes of fused
//     multiply-adds, see lanes8), so their float32 results equal
//     llama.cpp's on x86 bit for bit; the AVX2 assembly computes the same
//     integers but reduces in its own order (two accumulators in the row
//     loops, horizontal adds), which differs in the last bits.
//
// Why bit-level agreement matters: an activation is rounded to int8 (or a
// query or probability to float16) after every layer, so a last-bit
// difference moves a rounding by a whole step now and then, and a model
// amplifies that step through its layers. On llama.cpp's quantized files
// of ../shared/models/quant-ref, llama.cpp's own rounding moves
// log-probabilities by up to 0.22 from the exact product, and an exact
// reference, or llama.cpp itself with an F32 KV cache, disagrees with it by
// ~0.1; computing as ggml does brings the served path within 0.06 and the
// plain kernels, which also sum in ggml's order, to llama.cpp's values to 4
// decimals on all five files; see docs/bench/quant-exactness.md.

// Rows of weights are the unit of work: a weight row (at most a few KiB) is
// read from memory once and, while it sits in L1, multiplied with every
// activation row of the batch.

// actQ holds one MatMul's activations quantized to int8. It remembers the
// float rows it quantized last, so that MatMuls on the same input (q, k
// and v; gate and up) quantize it once: the rows are compared byte for
// byte, which is far cheaper than quantizing them again.
type actQ struct {
	q        []int8
	d        []float32
	bs       []int16
	tile8Act         // the ×8 tiles' data derived from q, d and bs (derive)
	built    layouts // the layouts of tile8Act derive made for these rows
	blk      int     // values per scale: 32 or 256
	k        int     // values per row
	n        int     // rows, counting the zero rows padRows appended
	nx       int     // rows quantized from the activations (n ≥ nx)

	src []float32 // a copy of the rows last quantized (nx×k)

	// qp are q's rows permuted for repacked Q4_K weights (permuteK,
	// k4rp.go), valid while qpOK (cleared when new rows are quantized)
	qp   []int8
	qpOK bool

	c16 []int16 // MXFP4's pair corrections (mxfp4.go), made by mxfp4Corr
	c32 []int32 // and its quad corrections for the VNNI kernels (mxvnni.go)

	// mxs are MXFP4's scale tables of up to mxTabRows activation rows
	// (mxfp4.go), valid while mxsOK: quantize clears it when it quantizes
	// new rows
	mxs   []float32
	mxsOK bool

	// mxg are the rows quantized for MXFP4's group tiles (mxgroup.go),
	// valid while mxg.ok (cleared with mxsOK)
	mxg mxgAct
}

// tile8Act is the data the ×8 tiles derive from a batch's quantized
// activations, formed again by scales8 for every batch. A view of some
// of a batch's rows (MatMulExperts' groups) keeps its own tile8Act, so
// that every buffer added here is reused without being listed there.
type tile8Act struct {
	d8 []float32 // d transposed for the ×8 tiles (scales8, qtile8.go)
	bp []int16   // the 32-value sums for the Q4_K ×8 tile (pairs8, qtilek.go)
	kt []int8    // the rows transposed for the Q4_K tiles of qtilekt.go (transposeK)
	kv []int8    // the same rows in the VNNI Q4_K tiles' order (transposeKV, k4v.go)
	b6 []int16   // the 16-value sums for the Q6_K tiles on kv (sums6, q6kv.go)
	s8 []int32   // 8·Σx per block of 32, transposed for the Q4_0 ×8 tile (scales8)
	qt []uint8   // q+128 transposed for the Q8_0 VNNI tile (transposeQ8, q8vnni.go)
	// q+128 and d transposed by groups of 16 rows for the Q8_0 4×16 tile
	// (transposeQ16, q8z.go)
	qz []uint8
	dz []float32
	sz []int32 // 8·Σx per block transposed by groups of 16 rows (Q4_0's 4×16 tile)
}

// emptied returns t with every buffer's length 0 (capacity kept).
func (t tile8Act) emptied() tile8Act {
	return tile8Act{d8: t.d8[:0], bp: t.bp[:0], kt: t.kt[:0], kv: t.kv[:0], b6: t.b6[:0], s8: t.s8[:0], qt: t.qt[:0], qz: t.qz[:0], dz: t.dz[:0], sz: t.sz[:0]}
}

// quantized reports whether dt is a block-quantized type (activations are
// quantized for it) and the activation block size it uses.
func quantized(dt kernels.DType) (bool, int) {
	switch dt {
	case kernels.Q8_0, kernels.Q4_0, kernels.MXFP4:
		return true, kernels.Q8Block
	case kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
		return true, quant.QKBlock
	}
	return false, 0
}

// quantizeFor quantizes n rows of x (k values each, xs apart) for weights
// of type dt with wr rows (quantizeRows), pads them with zero rows to np
// rows (padRows; np = n for none) and derives the activation layouts the
// tiles of dt read under k8 (derive). A MatMul on the same rows for another
// type quantizes nothing and derives only the layouts not yet made.
func (a *actQ) quantizeFor(k8 kern, dt kernels.DType, x []float32, xs, n, k, np, wr int) {
	_, blk := quantized(dt)
	a.quantizeRows(k8, x, xs, n, k, blk)
	a.padRows(np)
	a.derive(k8, dt, wr)
}

// padRows makes the quantized rows np (≥ nx) by appending zero rows (q,
// scale and sums 0) after the nx quantized ones, or by dropping those
// appended before: the tiles then take a batch whose row count is not a
// multiple of their 8 or 16 rows as whole groups (see padTo), and a zero
// row's products are 0. A change of the row count drops the derived
// layouts, which depend on it. Buffers grow once and are reused.
func (a *actQ) padRows(np int) {
	if np == a.n {
		return
	}
	k, nb := a.k, a.k/max(a.blk, 1)
	if cap(a.q) < np*k {
		a.q = append(make([]int8, 0, np*k), a.q[:a.nx*k]...)
	}
	if cap(a.d) < np*nb {
		a.d = append(make([]float32, 0, np*nb), a.d[:a.nx*nb]...)
	}
	if cap(a.bs) < np*k/16 {
		a.bs = append(make([]int16, 0, np*k/16), a.bs[:a.nx*k/16]...)
	}
	a.q, a.d, a.bs = a.q[:np*k], a.d[:np*nb], a.bs[:np*k/16]
	clear(a.q[a.nx*k:])
	clear(a.d[a.nx*nb:])
	clear(a.bs[a.nx*k/16:])
	a.n = np
	a.mxsOK, a.mxg.ok, a.qpOK = false, false, false
	a.tile8Act, a.built = a.tile8Act.emptied(), 0
}

// quantizeRows quantizes n rows of x (k values each, xs apart) in blocks
// of blk, growing the buffers as needed, unless they are the rows it
// quantized last. New rows drop every derived layout (tile8Act, emptied;
// built cleared).
func (a *actQ) quantizeRows(k8 kern, x []float32, xs, n, k, blk int) {
	if a.nx == n && a.k == k && a.blk == blk && a.same(x, xs) {
		return
	}
	nb := k / blk
	a.q, a.d, a.bs = sized(a.q, n*k), sized(a.d, n*nb), sized(a.bs, n*k/16)
	a.blk, a.k, a.n, a.nx = blk, k, n, n
	a.mxsOK, a.mxg.ok, a.qpOK = false, false, false
	a.tile8Act, a.built = a.tile8Act.emptied(), 0
	if cap(a.src) < n*k {
		a.src = make([]float32, n*k)
	}
	a.src = a.src[:n*k]
	for m := 0; m < n; m++ {
		xr := x[m*xs : m*xs+k]
		copy(a.src[m*k:(m+1)*k], xr)
		q, d, bs := a.q[m*k:(m+1)*k], a.d[m*nb:(m+1)*nb], a.bs[m*k/16:(m+1)*k/16]
		if k8.avx2 && nb > 0 {
			quantActAVX2(&xr[0], &q[0], &d[0], &bs[0], nb, blk)
		} else {
			quantizeActRow(xr, q, d, bs, blk)
		}
	}
}

// layouts is a set of the activation layouts of tile8Act.
type layouts uint8

// The layouts of tile8Act, each made from q, d and bs by derive.
const (
	layD8 layouts = 1 << iota // d8 (scales8)
	layKT                     // kt (transposeK)
	layBP                     // bp (pairs8)
	layKV                     // kv (transposeKV; made from kt's strides)
	layS8                     // s8 (sums8)
	layQT                     // qt (transposeQ8)
	layQZ                     // qz and dz (transposeQ16)
	layB6                     // b6 (sums6)
)

// tileLayouts returns the layouts the tiles of weight type dt read under
// k: every ×8 tile the transposed scales; the k-quants' transposed tiles
// (Q4_K, Q5_K on VNNI, Q6_K) the transposed rows, Q4_K's and Q5_K's the
// 32-value sums, Q4_K's, Q5_K's and Q6_K's VBMI tiles their own order
// (Q6_K's also its 16-value sums, b6); Q4_0's ×8 tile 8·Σx;
// Q8_0's and Q4_0's VNNI tiles q+128 transposed (by groups of 16 too
// under kern.q8z, q8z.go). MXFP4 and the float types read none.
func tileLayouts(k kern, dt kernels.DType) layouts {
	switch dt {
	case kernels.Q8_0:
		if k.vnni && k.q8z {
			return layD8 | layQT | layQZ
		}
		if k.vnni {
			return layD8 | layQT
		}
		return layD8
	case kernels.Q4_0:
		if k.vnni && k.q8z {
			return layD8 | layS8 | layQT | layQZ
		}
		if k.vnni {
			return layD8 | layS8 | layQT
		}
		return layD8 | layS8
	case kernels.Q4_K:
		if k.k4v {
			return layD8 | layKT | layBP | layKV
		}
		return layD8 | layKT | layBP
	case kernels.Q5_K:
		if k.k4v && k.vnni {
			return layD8 | layKT | layBP | layKV // dotQ5KTxNKV (q5v.go)
		}
		return layD8 | layKT | layBP
	case kernels.Q6_K:
		if k.k4v && k.vnni {
			return layD8 | layKT | layKV | layB6 // dotQ6KTxNKV (q6kv.go)
		}
		return layD8 | layKT
	}
	return 0
}

// derive makes the layouts that the tiles of dt read under k (tileLayouts)
// and that were not made since the rows were quantized: each MatMul pays
// only for what its weight's tiles read (a Q6_K or Q5_K product no longer
// transposes for Q4_K's VNNI tiles, an MXFP4 one for Q8_0's, and one whose
// every group of rows and weight row goes to the 4×16 tiles no longer
// transposes for the ×8 ones: zOnly). wr is the weight's rows (0: not
// known). Buffers are reused, so a step allocates nothing once they have
// grown.
func (a *actQ) derive(k kern, dt kernels.DType, wr int) {
	need := tileLayouts(k, dt) &^ a.built
	if need&layQZ != 0 && zOnly(dt, a.n, a.k, a.blk, wr) {
		need &^= layQT
	}
	if dt == kernels.Q6_K && !a.q6kvFits() {
		need &^= layKV | layB6
	}
	if need == 0 {
		return
	}
	if need&layD8 != 0 {
		a.scales8()
	}
	if need&layKT != 0 {
		a.transposeK()
	}
	if need&layBP != 0 {
		a.pairs8()
	}
	if need&layKV != 0 {
		a.transposeKV() // (kt made above or before: tileLayouts pairs them)
	}
	if need&layB6 != 0 {
		a.sums6()
	}
	if need&layS8 != 0 {
		a.sums8()
	}
	if need&layQT != 0 {
		a.transposeQ8() // the Q8_0 and Q4_0 VNNI tiles' rows (q8vnni.go)
	}
	if need&layQZ != 0 {
		a.transposeQ16(k.simd) // the Q8_0 4×16 tile's rows (q8z.go)
	}
	a.built |= need
}

// same reports whether the nx rows of x (xs apart) equal, bit for bit, the
// rows last quantized.
func (a *actQ) same(x []float32, xs int) bool {
	for m := 0; m < a.nx; m++ {
		if !bytes.Equal(f32Bytes(x[m*xs:m*xs+a.k]), f32Bytes(a.src[m*a.k:(m+1)*a.k])) {
			return false
		}
	}
	return true
}

// f32Bytes views floats as their bytes.
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// quantizeActRow quantizes x in blocks of blk values into q, one scale per
// block into d, and the sum of every 16 quantized values into bs, exactly
// as ggml quantizes the activations its dot products meet (see the numeric
// contract above and actBlock).
func quantizeActRow(x []float32, q []int8, d []float32, bs []int16, blk int) {
	for b := 0; b < len(x)/blk; b++ {
		d[b] = actBlock(x[b*blk:(b+1)*blk], q[b*blk:(b+1)*blk])
	}
	for g := range bs {
		var s int16
		for _, v := range q[g*16 : (g+1)*16] {
			s += int16(v)
		}
		bs[g] = s
	}
}

// actBlock quantizes one block of activations into q and returns its
// scale: with amax = max|x|, inv = 127/amax (float32) and
// q = round-half-even(x·inv); the scale is float16(amax/127) for blocks of
// 32 (ggml's Q8_0, whose scale is stored as float16) and 1/inv for blocks
// of 256 (ggml's Q8_K). ggml's Q8_K takes the signed value of largest
// magnitude m and uses −127/m, which negates q, the scale and the sums
// together when m > 0: every product is the same bit for bit. A block whose
// amax is 0 or so small that 127/amax overflows has scale 0 and q = 0.
func actBlock(x []float32, q []int8) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, math.Float32frombits(math.Float32bits(v)&0x7fffffff))
	}
	inv := 127 / amax
	var d float32
	if len(x) == quant.QKBlock {
		d = 1 / inv
	} else {
		d = quant.F16ToF32(quant.F32ToF16(amax / 127))
	}
	if math.IsInf(float64(inv), 0) {
		inv = 0
	}
	for j, v := range x {
		// the product rounded to float32 on its own, as VMULPS does (the
		// conversion forbids fusing it into a later add at GOAMD64=v3)
		q[j] = cvtI8(float32(v * inv))
	}
	return d
}

// cvtI8 rounds f to the nearest integer (ties to even) and saturates it to
// int8 as VCVTPS2DQ followed by the signed packs does: NaN and values
// beyond the int32 range become −128.
func cvtI8(f float32) int8 {
	r := math.RoundToEven(float64(f))
	if !(r >= -(1<<31) && r < 1<<31) {
		return -128
	}
	return int8(min(127, max(-128, r)))
}

// rowDot returns row m of the activations · one encoded weight row w (K
// values). x is the float activation row (F16, BF16), a the quantized
// activations (the other types).
func (k kern) rowDot(dt kernels.DType, w []byte, x []float32, a *actQ, m int) float32 {
	K := len(x)
	switch dt {
	case kernels.F16, kernels.BF16:
		return k.dotHalf(dt, w, x)
	}
	xq := a.q[m*K : (m+1)*K]
	xd := a.d[m*(K/a.blk) : (m+1)*(K/a.blk)]
	bs := a.bs[m*(K/16) : (m+1)*(K/16)]
	switch dt {
	case kernels.Q8_0:
		return k.dotQ8_0(w, xq, xd)
	case kernels.Q4_0:
		return k.dotQ4_0(w, xq, xd)
	case kernels.Q4_K:
		return k.dotQ4K(w, xq, xd, bs)
	case kernels.Q5_K:
		return k.dotQ5K(w, xq, xd, bs)
	case kernels.Q6_K:
		return k.dotQ6K(w, xq, xd, bs)
	case kernels.MXFP4:
		return k.dotMXFP4(w, a, m)
	}
	panic("cpu: rowDot: unsupported type " + dt.String())
}

// dotHalfGo is the plain dot product of x with an F16 or BF16 row.
func dotHalfGo(dt kernels.DType, w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s0, s1 float32
	conv := quant.F16ToF32
	if dt == kernels.BF16 {
		conv = quant.BF16ToF32
	}
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += x[i] * conv(binary.LittleEndian.Uint16(w[2*i:]))
		s1 += x[i+1] * conv(binary.LittleEndian.Uint16(w[2*i+2:]))
	}
	for ; i < len(x); i++ {
		s0 += x[i] * conv(binary.LittleEndian.Uint16(w[2*i:]))
	}
	return s0 + s1
}

// The plain-Go twins of the integer kernels below sum in the order of
// ggml's AVX2 dot products (ggml_vec_dot_*_q8_0 / *_q8_K; Q4_0 see
// dotQ4_0Go), so that their
// float32 results equal llama.cpp's on x86 bit for bit: per block (32
// values for Q8_0/Q4_0, a super-block of 256 for the k-quants) the exact
// integer products fall into 8 lanes, lane i holding the values whose
// index within their 32 is 4i..4i+3 (with their sub-block scales); each
// lane is a chain of fused multiply-adds acc_i += d·lane_i over the blocks,
// d = d_x·d_w rounded to float32; the lanes are then reduced as
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). The k-quants' min terms are
// accumulated apart (see each kernel) and added last.

// lanes8 is ggml's 8-lane float32 accumulator.
type lanes8 [8]float32

// add sets acc_i = fma(d, lane_i, acc_i).
func (a *lanes8) add(d float32, l *[8]int32) {
	for i, v := range l {
		a[i] = fma32(d, float32(v), a[i])
	}
}

// sum reduces the lanes as ggml's hsum_float_8.
func (a *lanes8) sum() float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// fma32 is a·b+c rounded once to float32 (through math.FMA's float64,
// which equals the single rounding but for a double-rounding tie no
// operand of these kernels produces in practice).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// dotQ4_0Go is the integer dot product of one Q4_0 row with Q8 activations
// (blocks of 32). On x86 with AVX2 ggml repacks Q4_0 weights (rows a
// multiple of 8) into interleaved blocks (q4_0_8x8) whose kernels add each
// block's whole integer sum in one chain of fused multiply-adds,
// acc = fma(Σ_block q·x, d_w·d_x, acc); this twin sums in that order.
func dotQ4_0Go(w []byte, xq []int8, xd []float32) float32 {
	var acc float32
	for b := range xd {
		blk := w[b*quant.Q4_0BlockBytes : (b+1)*quant.Q4_0BlockBytes]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk)) * xd[b]
		xb := xq[b*32 : (b+1)*32]
		var isum int32
		for j := 0; j < 16; j++ {
			isum += (int32(blk[2+j]&0xf) - 8) * int32(xb[j])
			isum += (int32(blk[2+j]>>4) - 8) * int32(xb[j+16])
		}
		acc = fma32(float32(isum), d, acc)
	}
	return acc
}

// dotQ4KGo is the integer dot product of one Q4_K row with Q8_K
// activations: per super-block d·Σ_j sc_j·(q·x)_j − dmin·Σ_j m_j·(Σx)_j,
// times the activation scale. The min terms go to 4 lanes of their own
// (pairs of sub-blocks), reduced as (m0+m2)+(m1+m3) and added last.
func dotQ4KGo(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	var acc lanes8
	var accM [4]float32
	for b := range xd {
		blk := w[b*quant.Q4KBlockBytes : (b+1)*quant.Q4KBlockBytes]
		d := xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := -xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales, qs := blk[4:16], blk[16:]
		xb := xq[b*256 : (b+1)*256]
		bb := bs[b*16 : (b+1)*16]
		var l [8]int32
		var m [8]int32
		for g := 0; g < 4; g++ {
			sc1, m1 := scaleMinK4(2*g, scales)
			sc2, m2 := scaleMinK4(2*g+1, scales)
			for j := 0; j < 32; j++ {
				l[j/4] += int32(sc1)*int32(qs[32*g+j]&0xf)*int32(xb[64*g+j]) + int32(sc2)*int32(qs[32*g+j]>>4)*int32(xb[64*g+32+j])
			}
			m[2*g] = int32(m1) * (int32(bb[4*g]) + int32(bb[4*g+1]))
			m[2*g+1] = int32(m2) * (int32(bb[4*g+2]) + int32(bb[4*g+3]))
		}
		acc.add(d, &l)
		for j := range accM {
			accM[j] = fma32(dmin, float32(m[2*j]+m[2*j+1]), accM[j])
		}
	}
	return acc.sum() + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
}

// dotQ5KGo is dotQ4KGo for Q5_K (the fifth bit from qh); its min terms
// are summed per super-block as one integer and accumulated in one float.
func dotQ5KGo(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	var acc lanes8
	var sumM float32
	for b := range xd {
		blk := w[b*quant.Q5KBlockBytes : (b+1)*quant.Q5KBlockBytes]
		d := xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := -xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:]
		xb := xq[b*256 : (b+1)*256]
		bb := bs[b*16 : (b+1)*16]
		var l [8]int32
		var mins int32
		for g := 0; g < 4; g++ {
			sc1, m1 := scaleMinK4(2*g, scales)
			sc2, m2 := scaleMinK4(2*g+1, scales)
			for j := 0; j < 32; j++ {
				lo := int32(qs[32*g+j]&0xf) | int32(qh[j]>>(2*g)&1)<<4
				hi := int32(qs[32*g+j]>>4) | int32(qh[j]>>(2*g+1)&1)<<4
				l[j/4] += int32(sc1)*lo*int32(xb[64*g+j]) + int32(sc2)*hi*int32(xb[64*g+32+j])
			}
			mins += int32(m1)*(int32(bb[4*g])+int32(bb[4*g+1])) + int32(m2)*(int32(bb[4*g+2])+int32(bb[4*g+3]))
		}
		acc.add(d, &l)
		sumM += dmin * float32(mins)
	}
	return acc.sum() + sumM
}

// dotQ6KGo is the integer dot product of one Q6_K row with Q8_K
// activations: per super-block d·Σ_i sc_i·Σ (q−32)·x over the 16 groups
// of 16 values.
func dotQ6KGo(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	var acc lanes8
	for b := range xd {
		blk := w[b*quant.Q6KBlockBytes : (b+1)*quant.Q6KBlockBytes]
		d := xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		xb := xq[b*256 : (b+1)*256]
		var l [8]int32
		for h := 0; h < 2; h++ {
			ql, qh, sc := blk[64*h:], blk[128+32*h:], blk[192+8*h:]
			x := xb[128*h:]
			for j := 0; j < 32; j++ {
				q1 := int32(ql[j]&0xf|(qh[j]&3)<<4) - 32
				q2 := int32(ql[j+32]&0xf|(qh[j]>>2&3)<<4) - 32
				q3 := int32(ql[j]>>4|(qh[j]>>4&3)<<4) - 32
				q4 := int32(ql[j+32]>>4|(qh[j]>>6&3)<<4) - 32
				is := j / 16
				l[j/4] += int32(int8(sc[is]))*q1*int32(x[j]) + int32(int8(sc[is+2]))*q2*int32(x[j+32]) +
					int32(int8(sc[is+4]))*q3*int32(x[j+64]) + int32(int8(sc[is+6]))*q4*int32(x[j+96])
			}
		}
		acc.add(d, &l)
	}
	return acc.sum()
}

// scaleMinK4 is ggml's get_scale_min_k4 (see quant): the 6-bit scale and
// min of sub-block j from the 12 packed bytes of a Q4_K or Q5_K block.
func scaleMinK4(j int, s []byte) (uint8, uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return (s[j+4] & 0xf) | ((s[j-4] >> 6) << 4), (s[j+4] >> 4) | ((s[j] >> 6) << 4)
}

// qmatTask computes a range of output columns (weight rows) of a MatMul on
// a weight in its stored encoding.
type qmatTask struct {
	k         kern
	out, x, w *kernels.Host
	n         int
	act       actQ
	hp        []halfScratch // per worker, for the F16/BF16 panel path (prepareHalf)
	xp        []float32     // the activations packed for the panel path (packPanels)
	xpN       int           // rows packed in xp for the running MatMul; 0 when none
}

func (t *qmatTask) run(lo, hi, wk int) {
	w, x, out := t.w, t.x, t.out
	K := w.C
	rb := w.DT.RowBytes(K)
	if t.n == 1 && t.k.avx2 && t.rows1(t.w, t.out, lo, hi) {
		return
	}
	if w.DT == kernels.MXFP4 && t.n >= 2 && t.k.avx2 {
		t.mxfp4Tiles(lo, hi)
		return
	}
	if (w.DT == kernels.F16 || w.DT == kernels.BF16) && t.n >= 2 && t.k.avx2 && K >= 8 {
		if t.panels(w.DT, t.n, K) && wk < len(t.hp) {
			t.halfPanels(lo, hi, &t.hp[wk])
			return
		}
		if t.k.simd && halfSMaxW(t.n) > 0 {
			t.halfSmallZ(lo, hi) // 2–7 rows on AVX-512 (halfs.go)
			return
		}
		t.halfBatch(lo, hi)
		return
	}
	if q, _ := quantized(w.DT); q && t.n >= 4 && t.k.avx2 {
		t.qTiles(lo, hi)
		return
	}
	if t.n > 1 && t.k.avx2 && t.rowsEach(lo, hi) {
		return
	}
	for o := lo; o < hi; o++ {
		wr := w.Q[o*rb : (o+1)*rb]
		for m := 0; m < t.n; m++ {
			out.F[m*out.C+o] = t.k.rowDot(w.DT, wr, x.F[m*x.C:m*x.C+K], &t.act, m)
		}
	}
}

// matmulStored sets out[:n] = x[:n] · wᵀ for a weight in its stored
// encoding (see the numeric contract above).
func (b *Backend) matmulStored(out, x, w *kernels.Host, n int) {
	if w.DT == kernels.MXFP4 && !b.mm.q8act {
		b.matmulMXFP4Exact(out, x, w, n)
		return
	}
	t := &b.qm
	t.k, t.out, t.x, t.w, t.n = b.k, out, x, w, n
	np := b.padTo(w, n)
	if q, _ := quantized(w.DT); q {
		t.act.quantizeFor(b.k, w.DT, x.F, x.C, n, w.C, np, w.R)
	}
	if np != n {
		// the tiles write np rows: the padded rows' outputs go to the
		// backend's own buffer, copied back below
		b.padOut = sized(b.padOut, np*out.C)
		b.padHost = kernels.Host{R: np, C: out.C, DT: kernels.F32, F: b.padOut}
		t.out, t.n = &b.padHost, np
	}
	if w.DT == kernels.MXFP4 && b.k.avx2 {
		t.act.mxfp4Prep(b.k, b.mxgRows(n), b.mxgRows(n))
	}
	if w.Repacked && (t.n < 4 || t.n%8 != 0 || len(t.act.d8) < t.n/8*(w.C/t.act.blk)*16) {
		// the row loops of repacked Q4_K weights (rows1, rowsEach, and
		// qTiles' leftover rows past the groups of 8: leftoversR)
		t.act.permuteK()
	}
	t.prepareHalf(b.pool.n)
	t.packPanels()
	switch {
	case n*w.R*w.C < 1<<15:
		t.run(0, w.R, 0)
	case n == 1:
		// one row loop per chunk: smaller chunks cost nothing extra, so
		// they shrink towards the op's end and both threads finish together
		b.pool.parallelGuided(w.R, 4, 0, t)
	case t.xpN == t.n && t.n <= 16:
		// one panel packed once (packPanels): a chunk's cost is its rows'
		// alone, so the chunks shrink too, to 1/64 of a thread's share
		// (parallelGuidedFine); whole groups of 16 rows
		b.pool.parallelGuidedFine(w.R, halfZMaxW1, 0, t)
	default:
		b.pool.parallel(w.R, 4, 0, t)
	}
	if np != n {
		for m := 0; m < n; m++ {
			copy(out.F[m*out.C:m*out.C+w.R], b.padOut[m*out.C:m*out.C+w.R])
		}
	}
	t.out, t.x, t.w, t.xpN = nil, nil, nil, 0
}

// rowsEachBlock is how many weight rows rowsEach runs for one activation
// row before the next row's pass over them: 64 Q4_K rows of 2048 values
// are 72 KiB, which the next pass finds in L2.
const rowsEachBlock = 64

// rowsEach computes rows [lo, hi) for t's 2 or 3 activation rows (fewer
// than the tiles of qTiles take) with the batch-1 row loop of rows1, one
// pass per activation row over each block of rowsEachBlock weight rows,
// and reports whether w's type has such a loop. Groups of 1–3 rows are
// what most experts get at 16-stream decode of a many-expert model
// (Qwen3-30B-A3B: 16 tokens × top-8 over 128 experts); the plain loop in
// run calls rowDot once per weight row and activation row. Results equal
// rowDot's bit for bit (rows1's contract).
func (t *qmatTask) rowsEach(lo, hi int) bool {
	switch t.w.DT {
	case kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
	default:
		return false
	}
	a, K := &t.act, t.w.C
	nb := K / a.blk
	var one qmatTask // a view of one activation row (rows1 reads act only)
	var dst kernels.Host
	for b0 := lo; b0 < hi; b0 += rowsEachBlock {
		b1 := min(hi, b0+rowsEachBlock)
		for m := 0; m < t.n; m++ {
			one.act.q, one.act.d, one.act.bs = a.q[m*K:(m+1)*K], a.d[m*nb:(m+1)*nb], a.bs[m*K/16:(m+1)*K/16]
			if t.w.Repacked {
				one.act.qp = a.qp[m*K : (m+1)*K]
			}
			one.act.blk, one.act.k, one.act.n = a.blk, K, 1
			dst = kernels.Host{R: 1, C: t.out.C, F: t.out.F[m*t.out.C : (m+1)*t.out.C]}
			one.rows1(t.w, &dst, b0, b1)
		}
	}
	return true
}

// rows1 computes rows [lo, hi) of w into dst against a single activation
// row (t.x, quantized in t.act) with one row-loop kernel call (no per-row
// call, slicing or type switch) and reports whether the type has such a
// kernel. The rows' results equal rowDot's bit for bit.
func (t *qmatTask) rows1(w, dst *kernels.Host, lo, hi int) bool {
	a := &t.act
	K := w.C
	if K == 0 {
		return false
	}
	if hi <= lo {
		return true
	}
	rb := w.DT.RowBytes(K)
	wr := w.Q[lo*rb : hi*rb]
	out := dst.F[lo:hi]
	rows := hi - lo
	switch w.DT {
	case kernels.F16, kernels.BF16:
		if K%32 != 0 {
			return false
		}
		halfRows1(w.DT == kernels.BF16, wr, t.x.F[:K], K, out)
	case kernels.Q8_0, kernels.Q4_0:
		// q8rows_amd64.s: the weights prefetched 2 KiB ahead, Q4_0 with
		// fewer instructions per block; bit-equal to the one-row kernels
		// (rowDot)
		nb := K / kernels.Q8Block
		_, _ = a.q[nb*32-1], a.d[nb-1]
		if w.DT == kernels.Q8_0 {
			// three rows a third of the range apart per pass (q8s3_amd64.s:
			// three memory streams, +24…+36 % GB per CPU-second from memory)
			q8_0Rows1(wr, a.q[:nb*32], a.d[:nb], nb, out)
		} else {
			dotQ4_0RowsQuadAVX2(&wr[0], &a.q[0], &a.d[0], nb, rows, &out[0])
		}
	case kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
		nb := K / quant.QKBlock
		_, _, _ = a.q[nb*256-1], a.d[nb-1], a.bs[nb*16-1]
		switch w.DT {
		case kernels.Q4_K:
			if w.Repacked {
				// repacked at load: fewer instructions per block
				// (k4rp_amd64.s), on the permuted activations
				q4kRows1R(wr, a.qp[:nb*256], a.d, a.bs, nb, out)
				break
			}
			// two rows half the range apart per pass (ks2_amd64.s)
			q4kRows1(wr, a.q, a.d, a.bs, nb, out)
		case kernels.Q5_K:
			// prefetching 2 KiB ahead (q6rows_amd64.s); on AVX-512 VNNI
			// two rows half the range apart per pass (q5rows_amd64.s)
			q5kRows1(t.k.vnni, wr, a.q, a.d, a.bs, nb, out)
		default:
			// two rows half the range apart per pass, scales in registers
			// (q6s2_amd64.s; on AVX-512 VNNI q6vrows_amd64.s);
			// dotQ6KRowsAVX2 stays as the tests' reference
			q6kRows1(t.k.vnni, wr, a.q, a.d, a.bs, nb, out)
		}
	case kernels.MXFP4:
		mxfp4Rows(t.k, wr, a, K/32, rows, out)
	default:
		return false
	}
	return true
}
