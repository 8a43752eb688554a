package asmgen

import (
	"fmt"
	"strings"
)

// q8rowsKernel is one multi-row batch-1 loop on Q8_0 or Q4_0 weights.
type q8rowsKernel struct {
	// q4 selects Q4_0 (18-byte blocks of nibbles) over Q8_0 (34-byte
	// blocks of bytes).
	q4 bool
	// rows is how many consecutive weight rows one pass computes.
	rows int
	// ahead is the software-prefetch distance in bytes within each row's
	// stream (0: none); next prefetches the same block of the next group
	// of rows instead.
	ahead int
	next  bool
	// double asks for two prefetches, one line apart, per iteration.
	double bool
}

// name is the kernel's Go name.
func (k q8rowsKernel) name() string {
	f := "Q8_0"
	if k.q4 {
		f = "Q4_0"
	}
	pf := ""
	switch {
	case k.next:
		pf = "Next"
	case k.ahead > 0:
		pf = "Pf"
	}
	rows := ""
	if k.rows > 1 {
		rows = fmt.Sprint(k.rows)
	}
	return fmt.Sprintf("dot%sRows%s%sAVX2", f, rows, pf)
}

// q8rowsKernels lists the generated loops: one row per pass, weights
// prefetched 2 KiB ahead (Q8_0: the two lines at 2048 and 2112 bytes on per
// 68-byte iteration). Measured on one thread (BenchmarkQ8Rows,
// docs/bench/kquant-decode.md), streaming from memory: Q8_0 one row and no
// prefetch 10.0 GB per CPU-second as the old loop, one line 2 KiB ahead
// 12.3–13.0, 1/3/4 KiB ahead or the next row's block 11.6–13.1, two lines
// 2 KiB ahead 1–11 % above one (5 paired runs; PREFETCHT1, PREFETCHNTA and
// 4 KiB no better); two and four rows per pass 6.7–11.7 (two or four
// interleaved streams defeat the hardware prefetcher, as for the two-row
// Q4_K loop) though 12–15 % faster in L2. Four blocks per iteration with
// their four scales converted at once: +14 % in L2, nothing streaming.
// Q4_0 is bound by instructions rather than memory: unsigned nibbles
// against the activation less its 8·x pairs take two instructions per
// block fewer than the old loop's sign trick (+15…+17 % in L2, +14…+21 %
// streamed); the served Q4_0 loop is q4_0Quad's, which also converts four
// blocks' scales at once (a further +11…+14 % in L2, +5…+8 % streamed).
func q8rowsKernels() []q8rowsKernel {
	return []q8rowsKernel{{rows: 1, ahead: 2048, double: true}, {q4: true, rows: 1, ahead: 2048}}
}

// q8rows writes q8rows_amd64.s: the batch-1 row loops on Q8_0 and Q4_0
// weights that the served path uses (dotQ8_0RowsPfAVX2 and, from
// q4_0Quad, dotQ4_0RowsQuadAVX2), and the one-block Q4_0 loop
// dotQ4_0RowsPfAVX2 that BenchmarkQ8Rows compares them with (see
// q8rowsKernels for what was measured). The generator can also write loops over several consecutive
// weight rows per pass, sharing each activation load between them; they
// were slower streaming from memory and are not generated.
//
// Every row is computed in exactly the order of the one-row loops of
// qdotgen_amd64.s (Q8_0: blocks alternate between two eight-lane
// accumulators, one fused multiply-add per block; Q4_0: one accumulator;
// the same final reduction) from the same integer block sums, so each
// result equals theirs bit for bit.
func q8rows() string {
	var a asm
	a.header()
	a.lines(`
// Batch-1 row loops on Q8_0 and Q4_0 weights with software prefetch (see
// q8rows.go in package asmgen and the numeric contract in qmat.go). rows
// is a multiple of the loop's row count; rows are nb blocks apart; out
// receives rows floats.`)
	for _, k := range q8rowsKernels() {
		a.q8rowsLoop(k)
	}
	a.q4_0Quad("dotQ4_0RowsQuadAVX2", 2048)
	return a.b.String()
}

// rowIndex returns the address suffix of weight row r of a group whose
// row 0 is at SI (rows rb bytes apart: R8 = rb, R10 = 3rb, R11 = 5rb,
// R12 = 7rb).
func rowIndex(r int) string {
	return [...]string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R10*1)", "(SI)(R8*4)", "(SI)(R11*1)", "(SI)(R10*2)", "(SI)(R12*1)"}[r]
}

// q8rowsLoop writes one kernel. Registers: SI the current block of the
// group's first row, DI/DX the activation's bytes and scales, CX the blocks
// left, R9 the rows left, R15 out; Y15 the int16 ones; Y8 the activation
// block, Y9 its scale (Q8_0); Y0–Y7 the accumulators (Q8_0: row r's even
// blocks in Yr, odd in Y(r+rows)).
func (a *asm) q8rowsLoop(k q8rowsKernel) {
	R := k.rows
	bs, sets, unroll := 34, 2, 2
	if k.q4 {
		bs, sets, unroll = 18, 1, 4
	}
	name := k.name()
	lbl := strings.ToLower(strings.TrimSuffix(name, "AVX2"))
	a.l("")
	a.l("// func %s(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)", name)
	a.l("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	a.code(`
MOVQ w+0(FP), SI
MOVQ nb+24(FP), R8
MOVQ rows+32(FP), R9
MOVQ out+40(FP), R15
VPCMPEQW Y15, Y15, Y15
VPSRLW $15, Y15, Y15`)
	a.l("\tIMULQ $%d, R8", bs)
	a.code(`
LEAQ (R8)(R8*2), R10
LEAQ (R8)(R8*4), R11
LEAQ (R10)(R8*4), R12`)
	if k.q4 {
		a.code(broadcast(0x0f0f0f0f, 14) + "\n" + broadcast(0x08080808, 13))
	}
	a.l("%sgroup:", lbl)
	a.code(`
MOVQ xq+8(FP), DI
MOVQ xd+16(FP), DX
MOVQ nb+24(FP), CX`)
	for i := 0; i < R*sets; i++ {
		a.l("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	a.l("%sloop:", lbl)
	for r := 0; r < R; r++ {
		switch {
		case k.next:
			a.l("\tPREFETCHT0 %s", rowIndex(R+r))
		case k.ahead > 0:
			a.l("\tPREFETCHT0 %d%s", k.ahead, rowIndex(r))
			if k.double {
				a.l("\tPREFETCHT0 %d%s", k.ahead+64, rowIndex(r))
			}
		}
	}
	for u := 0; u < unroll; u++ {
		set := u % sets
		a.l("\tVMOVDQU (DI), Y8")
		a.l("\tVBROADCASTSS (DX), Y9")
		if k.q4 {
			a.l("\tVPMADDUBSW Y8, Y13, Y7")
		}
		for r := 0; r < R; r++ {
			acc := fmt.Sprintf("Y%d", r+set*R)
			at := func(off int) string {
				if off == 0 {
					return rowIndex(r)
				}
				return fmt.Sprintf("%d%s", off, rowIndex(r))
			}
			if k.q4 {
				// unsigned nibbles u against x, less the shared 8·x pairs
				// (Y7): the same int16 pair sums as dotQ4_0AVX2's
				// |u−8| × x·sign(u−8), so the same int32 sums
				a.code(fmt.Sprintf(`
VPBROADCASTW %s, X10
VCVTPH2PS X10, Y10
VMULPS Y9, Y10, Y10
VMOVDQU %s, X11
VPSRLW $4, X11, X12
VINSERTI128 $1, X12, Y11, Y11
VPAND Y14, Y11, Y11
VPMADDUBSW Y8, Y11, Y11
VPSUBW Y7, Y11, Y11
VPMADDWD Y15, Y11, Y11
VCVTDQ2PS Y11, Y11
VFMADD231PS Y11, Y10, %s`, at(0), at(2), acc))
			} else {
				// as Q8BLK: |w| × x·sign(w), pairs summed, scaled by d_w·d_x
				a.code(fmt.Sprintf(`
VPBROADCASTW %s, X10
VCVTPH2PS X10, Y10
VMULPS Y9, Y10, Y10
VMOVDQU %s, Y11
VPABSB Y11, Y12
VPSIGNB Y11, Y8, Y11
VPMADDUBSW Y11, Y12, Y11
VPMADDWD Y15, Y11, Y11
VCVTDQ2PS Y11, Y11
VFMADD231PS Y11, Y10, %s`, at(0), at(2), acc))
			}
		}
		a.l("\tADDQ $%d, SI", bs)
		a.l("\tADDQ $32, DI")
		a.l("\tADDQ $4, DX")
		a.l("\tDECQ CX")
		if u < unroll-1 {
			a.l("\tJZ %sdone", lbl)
		} else {
			a.l("\tJNZ %sloop", lbl)
		}
	}
	a.l("%sdone:", lbl)
	// per row: (Q8_0) odd blocks into even, then HSUM8's order: the high
	// lane onto the low, then two pairwise horizontal adds
	for r := 0; r < R; r++ {
		if sets == 2 {
			a.l("\tVADDPS Y%d, Y%d, Y%d", r+R, r, r)
		}
		a.l("\tVEXTRACTF128 $1, Y%d, X10", r)
		a.l("\tVADDPS X10, X%d, X%d", r, r)
	}
	switch R {
	case 1:
		a.code("VHADDPS X0, X0, X0\nVHADDPS X0, X0, X0\nMOVSS X0, (R15)")
	case 2:
		a.code("VHADDPS X1, X0, X0\nVHADDPS X0, X0, X0\nMOVSD X0, (R15)")
	case 4:
		a.code("VHADDPS X1, X0, X0\nVHADDPS X3, X2, X2\nVHADDPS X2, X0, X0\nVMOVUPS X0, (R15)")
	}
	a.l("\tADDQ $%d, R15", 4*R)
	switch R {
	case 2:
		a.l("\tADDQ R8, SI")
	case 4:
		a.l("\tADDQ R10, SI")
	}
	a.l("\tSUBQ $%d, R9", R)
	a.l("\tJNZ %sgroup", lbl)
	a.code("VZEROUPPER\nRET")
}

// q4_0Quad writes a one-row Q4_0 loop with q8rowsLoop's block body that
// takes four blocks per iteration while four remain: their four float16
// scales are gathered into one register, converted and multiplied by the
// four activation scales at once, and each block's product is broadcast
// from a 16-byte frame slot. The rest of a row (nb mod 4 blocks) runs the
// one-block body. One accumulator, blocks in order: the result equals
// dotQ4_0AVX2's bit for bit.
func (a *asm) q4_0Quad(name string, ahead int) {
	lbl := strings.ToLower(strings.TrimSuffix(name, "AVX2"))
	a.l("")
	a.l("// func %s(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)", name)
	a.l("TEXT ·%s(SB), NOSPLIT, $16-48", name)
	a.code(`
MOVQ w+0(FP), SI
MOVQ rows+32(FP), R9
MOVQ out+40(FP), R15
VPCMPEQW Y15, Y15, Y15
VPSRLW $15, Y15, Y15`)
	a.code(broadcast(0x0f0f0f0f, 14) + "\n" + broadcast(0x08080808, 13))
	a.l("%srows:", lbl)
	a.code(`
MOVQ xq+8(FP), DI
MOVQ xd+16(FP), DX
MOVQ nb+24(FP), CX
VXORPS Y0, Y0, Y0
MOVQ CX, BX
SHRQ $2, BX`)
	a.l("\tJZ %srest", lbl)
	a.l("%squad:", lbl)
	a.l("\tPREFETCHT0 %d(SI)", ahead)
	a.code(`
MOVWLZX (SI), AX
VMOVD AX, X10
VPINSRW $1, 18(SI), X10, X10
VPINSRW $2, 36(SI), X10, X10
VPINSRW $3, 54(SI), X10, X10
VCVTPH2PS X10, X10
VMULPS (DX), X10, X10
VMOVUPS X10, (SP)`)
	for k := 0; k < 4; k++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(DI), Y8
VPMADDUBSW Y8, Y13, Y7
VBROADCASTSS %d(SP), Y10
VMOVDQU %d(SI), X11
VPSRLW $4, X11, X12
VINSERTI128 $1, X12, Y11, Y11
VPAND Y14, Y11, Y11
VPMADDUBSW Y8, Y11, Y11
VPSUBW Y7, Y11, Y11
VPMADDWD Y15, Y11, Y11
VCVTDQ2PS Y11, Y11
VFMADD231PS Y11, Y10, Y0`, 32*k, 4*k, 18*k+2))
	}
	a.code(`
ADDQ $72, SI
ADDQ $128, DI
ADDQ $16, DX
DECQ BX`)
	a.l("\tJNZ %squad", lbl)
	a.l("%srest:", lbl)
	a.l("\tANDQ $3, CX")
	a.l("\tJZ %sdone", lbl)
	a.l("%sone:", lbl)
	a.code(`
VMOVDQU (DI), Y8
VBROADCASTSS (DX), Y9
VPMADDUBSW Y8, Y13, Y7
VPBROADCASTW (SI), X10
VCVTPH2PS X10, Y10
VMULPS Y9, Y10, Y10
VMOVDQU 2(SI), X11
VPSRLW $4, X11, X12
VINSERTI128 $1, X12, Y11, Y11
VPAND Y14, Y11, Y11
VPMADDUBSW Y8, Y11, Y11
VPSUBW Y7, Y11, Y11
VPMADDWD Y15, Y11, Y11
VCVTDQ2PS Y11, Y11
VFMADD231PS Y11, Y10, Y0
ADDQ $18, SI
ADDQ $32, DI
ADDQ $4, DX
DECQ CX`)
	a.l("\tJNZ %sone", lbl)
	a.l("%sdone:", lbl)
	a.code(`
VEXTRACTF128 $1, Y0, X10
VADDPS X10, X0, X0
VHADDPS X0, X0, X0
VHADDPS X0, X0, X0
MOVSS X0, (R15)
ADDQ $4, R15
DECQ R9`)
	a.l("\tJNZ %srows", lbl)
	a.code("VZEROUPPER\nRET")
}
