package asmgen

import (
	"fmt"
	"strings"
)

// krows writes krows_amd64.s: the batch-1 Q4_K row loop that computes two
// weight rows per pass over the activation row. Both rows share each
// activation load, the activation's sums and scale, the unpacking of the
// two rows' 6-bit scales (one ymm register, a row per lane) and the loop
// bookkeeping, which cuts the instructions per weight of the one-row loop
// of qdotgen_amd64.s by about an eighth (87 → 76 per row and block; in L2
// 13–18 % more weight bytes per CPU-second, see docs/bench/kquant-decode.md);
// the sub-block scales are kept as
// doubled words in dwords so that each is broadcast by a plain load
// (VPBROADCASTD) rather than a load and a shuffle (VPBROADCASTW).
//
// The same construction for Q5_K gained 3 % in L2 but lost 5–8 % streaming
// from memory, and for Q6_K (no packed scales to share) lost 8 %: both keep
// their one-row loops.
//
// Each row's result is computed in exactly the order of the one-row loop
// (integer block sums, one fused multiply-add per block into eight lanes,
// the same final reduction), so the results equal it bit for bit.
func krows() string {
	var a asm
	a.header()
	a.lines(`
// Two-row batch-1 loop on Q4_K weights (see krows.go in package asmgen
// and the numeric contract in qmat.go). rows is even; rows are nb blocks
// apart; out receives rows floats.`)
	a.l("%s", krowsConsts)
	a.q4kRows2()
	return a.b.String()
}

// krowsConsts are the masks of the scale unpacking and the VPERMPS index
// that spreads the two rows' dmin over their lanes.
const krowsConsts = `
DATA kr3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kr3f<>+8(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kr3f<>+16(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kr3f<>+24(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL kr3f<>(SB), RODATA|NOPTR, $32
DATA kr30<>+0(SB)/8, $0x3030303030303030
DATA kr30<>+8(SB)/8, $0x3030303030303030
DATA kr30<>+16(SB)/8, $0x3030303030303030
DATA kr30<>+24(SB)/8, $0x3030303030303030
GLOBL kr30<>(SB), RODATA|NOPTR, $32
DATA krdmin<>+0(SB)/8, $0x0000000100000001
DATA krdmin<>+8(SB)/8, $0x0000000100000001
DATA krdmin<>+16(SB)/8, $0x0000000300000003
DATA krdmin<>+24(SB)/8, $0x0000000300000003
GLOBL krdmin<>(SB), RODATA|NOPTR, $32`

// kscales2 unpacks the 12 scale bytes of the current blocks of both rows
// (row A at 4(SI), row B at 4(SI)(R8*1)): the sub-block scales go to the
// frame as dwords holding the scale in both words (row A's scales 0-3 at
// 0(SP), 4-7 at 32(SP); row B's 16 bytes after each), the mins stay in Y9
// as words (row A in the low lane, row B in the high one). Same bit
// arithmetic as KSCALESV of qdotgen_amd64.s, a row per lane. Needs zero in
// Y13 and 0x0f bytes in Y14.
const kscales2 = `VMOVDQU 4(SI), X8
VINSERTI128 $1, 4(SI)(R8*1), Y8, Y8
VPAND kr3f<>(SB), Y8, Y9
VPSRLW $2, Y8, Y10
VPAND kr30<>(SB), Y10, Y10
VPAND Y14, Y8, Y11
VPSRLW $4, Y8, Y12
VPAND Y14, Y12, Y12
VPUNPCKHDQ Y12, Y11, Y11
VPOR Y11, Y10, Y10
VPUNPCKLDQ Y10, Y9, Y9
VPUNPCKLBW Y13, Y9, Y10
VPUNPCKHBW Y13, Y9, Y9
VPUNPCKLWD Y10, Y10, Y11
VPUNPCKHWD Y10, Y10, Y12
VMOVDQU Y11, 0(SP)
VMOVDQU Y12, 32(SP)`

// khead2 forms d·xd of both rows (broadcast in Y5 and Y6) and adds
// dmin·xd·Σ_j m_j·(Σx)_j of each row to its lane of Y4 (subtracted at the
// end): the one-row loop's KHEAD, a row per lane. Needs the mins in Y9 and
// the dmin index in Y15.
const khead2 = `VMOVD (SI), X7
VPINSRD $1, (SI)(R8*1), X7, X7
VCVTPH2PS X7, X7
VBROADCASTSS (DX), X8
VMULPS X8, X7, X7
VBROADCASTSS X7, Y5
VSHUFPS $0xaa, X7, X7, X8
VBROADCASTSS X8, Y6
VPERMPS Y7, Y15, Y7
VMOVDQU (BX), X10
VPHADDW 16(BX), X10, X10
VINSERTI128 $1, X10, Y10, Y10
VPMADDWD Y9, Y10, Y10
VCVTDQ2PS Y10, Y10
VFMADD231PS Y10, Y7, Y4`

// q4kGroup2 does values 64g..64g+63 of both rows' blocks: the activations
// are loaded once (Y7, Y8) and multiplied with each row's low and high
// nibbles and its two sub-block scales, adding to the row's integer
// accumulator (Y2 for row A, Y3 for row B; group 0 sets them).
func q4kGroup2(g int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "VMOVDQU %s(DI), Y7\nVMOVDQU %d(DI), Y8\n", off(64*g), 64*g+32)
	for r, row := range []struct{ w, acc string }{{"(SI)", "Y2"}, {"(SI)(R8*1)", "Y3"}} {
		// scale j of row r: 4j (+32 for j ≥ 4) plus 16 for row B
		so := func(j int) int { return 4*(j%4) + 32*(j/4) + 16*r }
		fmt.Fprintf(&b, "VPBROADCASTD %d(SP), Y9\nVPBROADCASTD %d(SP), Y10\n", so(2*g), so(2*g+1))
		fmt.Fprintf(&b, "VMOVDQU %d%s, Y11\n", 16+32*g, row.w)
		b.WriteString("VPSRLW $4, Y11, Y12\nVPAND Y14, Y11, Y11\nVPAND Y14, Y12, Y12\n")
		b.WriteString("VPMADDUBSW Y7, Y11, Y11\nVPMADDUBSW Y8, Y12, Y12\n")
		b.WriteString("VPMADDWD Y9, Y11, Y11\nVPMADDWD Y10, Y12, Y12\n")
		if g == 0 {
			fmt.Fprintf(&b, "VPADDD Y12, Y11, %s\n", row.acc)
		} else {
			fmt.Fprintf(&b, "VPADDD Y11, %s, %s\nVPADDD Y12, %s, %s\n", row.acc, row.acc, row.acc, row.acc)
		}
	}
	return b.String()
}

// q4kRows2 writes dotQ4KRows2AVX2.
func (a *asm) q4kRows2() {
	var body strings.Builder
	// the same block of the next pair of rows (R10 = 2 rows on, R11 = 3)
	for _, o := range []int{0, 64, 128} {
		fmt.Fprintf(&body, "PREFETCHT0 %s(SI)(R10*1)\nPREFETCHT0 %s(SI)(R11*1)\n", off(o), off(o))
	}
	body.WriteString(kscales2 + "\n" + khead2 + "\n")
	for g := 0; g < 4; g++ {
		body.WriteString(q4kGroup2(g))
	}
	body.WriteString(`VCVTDQ2PS Y2, Y2
VFMADD231PS Y2, Y5, Y0
VCVTDQ2PS Y3, Y3
VFMADD231PS Y3, Y6, Y1
ADDQ $144, SI
ADDQ $256, DI
ADDQ $4, DX
ADDQ $32, BX
DECQ CX
JNZ q4krows2loop`)
	a.l("")
	a.l("// func dotQ4KRows2AVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)")
	a.l("TEXT ·dotQ4KRows2AVX2(SB), NOSPLIT, $64-56")
	a.code(`
MOVQ w+0(FP), SI
MOVQ nb+32(FP), R8
IMULQ $144, R8
LEAQ (R8)(R8*1), R10
LEAQ (R8)(R8*2), R11
MOVQ rows+40(FP), R9
SHRQ $1, R9
MOVQ out+48(FP), R15
` + broadcast(0x0f0f0f0f, 14) + `
VPXOR Y13, Y13, Y13
VMOVDQU krdmin<>(SB), Y15
q4krows2rows:
MOVQ xq+8(FP), DI
MOVQ xd+16(FP), DX
MOVQ bs+24(FP), BX
MOVQ nb+32(FP), CX
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1
VXORPS Y4, Y4, Y4
q4krows2loop:`)
	a.code(body.String())
	// each row as the one-row loop reduces it: HSUM8 of its float lanes,
	// minus the two horizontal adds of its four min lanes
	a.code(`
VEXTRACTF128 $1, Y0, X7
VADDPS X7, X0, X0
VEXTRACTF128 $1, Y1, X8
VADDPS X8, X1, X1
VHADDPS X1, X0, X0
VHADDPS X0, X0, X0
VEXTRACTF128 $1, Y4, X9
VHADDPS X9, X4, X4
VHADDPS X4, X4, X4
VSUBPS X4, X0, X0
VMOVQ X0, (R15)
ADDQ $8, R15
ADDQ R8, SI
DECQ R9
JNZ q4krows2rows
VZEROUPPER
RET`)
}
