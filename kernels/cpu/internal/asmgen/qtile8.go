package asmgen

import (
	"fmt"
	"strings"
)

// qtile8 writes qtile8_amd64.s: the ×8 tiles of the batched paths (one
// weight row, decoded once per block, against 8 activation rows). Unlike
// the ×4 tiles, which scale every row's 8 integer lanes into 8 float lanes
// of its own per block, the ×8 tiles first add the rows' integer lanes
// horizontally (exact), so that one conversion and one fused multiply-add
// fold a block of 4 rows: the float accumulators hold [r0 r1 r2 r3 | r0 r1
// r2 r3] (the two 128-bit halves sum different values of the block) and
// the rows' activation scales come from the transposed copy actQ.d8, laid
// out the same way.
func qtile8() string {
	var a asm
	a.header()
	a.lines(`
// Batched ×8 tiles on block-quantized weights (see qtile8.go and the
// numeric contract in qmat.go). Activation rows are xs bytes apart; xd8
// holds, per block, the 8 rows' scales as [r0-r3 r0-r3 r4-r7 r4-r7].`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.q8_0x8(false)
	a.q8_0x8(true)
	a.kx8(false)
	a.kx8(true)
	a.q6Kx8()
	return a.b.String()
}

// macrosTile8 are the folds the ×8 tiles share.
const macrosTile8 = `DATA t8mask0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t8mask0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t8mask0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t8mask0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL t8mask0f<>(SB), RODATA|NOPTR, $32
DATA t8mask08<>+0(SB)/8, $0x0808080808080808
DATA t8mask08<>+8(SB)/8, $0x0808080808080808
DATA t8mask08<>+16(SB)/8, $0x0808080808080808
DATA t8mask08<>+24(SB)/8, $0x0808080808080808
GLOBL t8mask08<>(SB), RODATA|NOPTR, $32
DATA t8mask10<>+0(SB)/8, $0x1010101010101010
DATA t8mask10<>+8(SB)/8, $0x1010101010101010
DATA t8mask10<>+16(SB)/8, $0x1010101010101010
DATA t8mask10<>+24(SB)/8, $0x1010101010101010
GLOBL t8mask10<>(SB), RODATA|NOPTR, $32
DATA t8mask3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA t8mask3f<>+8(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL t8mask3f<>(SB), RODATA|NOPTR, $16
DATA t8mask30<>+0(SB)/8, $0x3030303030303030
DATA t8mask30<>+8(SB)/8, $0x3030303030303030
DATA t8mask30<>+16(SB)/8, $0x3030303030303030
DATA t8mask30<>+24(SB)/8, $0x3030303030303030
GLOBL t8mask30<>(SB), RODATA|NOPTR, $32

// t8shuf picks, from a dword [a b] broadcast to every lane, word a for the
// low 128-bit lane and word b for the high one.
DATA t8shuf<>+0(SB)/8, $0x0100010001000100
DATA t8shuf<>+8(SB)/8, $0x0100010001000100
DATA t8shuf<>+16(SB)/8, $0x0302030203020302
DATA t8shuf<>+24(SB)/8, $0x0302030203020302
GLOBL t8shuf<>(SB), RODATA|NOPTR, $32

// KSCALES8 unpacks the 12 scale bytes of a Q4_K block at 4(SI) as
// KSCALESV of qdotgen_amd64.s does, through X0-X4 (free at the head of a
// ×8 super-block): the eight scales as words at 0(SP), the eight mins as
// words arranged [m0-3 m0-3 | m4-7 m4-7] at 32(SP). Needs 0x0f bytes in
// X14.
#define KSCALES8 \
	VMOVDQU 4(SI), X0; \
	VPAND t8mask3f<>(SB), X0, X1; \
	VPSRLW $2, X0, X2; \
	VPAND t8mask30<>(SB), X2, X2; \
	VPAND X14, X0, X3; \
	VPSRLW $4, X0, X4; \
	VPAND X14, X4, X4; \
	VPUNPCKHDQ X4, X3, X3; \
	VPOR X3, X2, X2; \
	VPUNPCKLDQ X2, X1, X1; \
	VPMOVZXBW X1, X2; \
	VMOVDQU X2, 0(SP); \
	VPSRLDQ $8, X1, X1; \
	VPMOVZXBW X1, X1; \
	VPUNPCKLQDQ X1, X1, X2; \
	VPUNPCKHQDQ X1, X1, X1; \
	VINSERTI128 $1, X1, Y2, Y2; \
	VMOVDQU Y2, 32(SP)

// HADD4 adds the 8 int32 lanes of each of Ya, Yb, Yc, Yd (rows 0-3)
// pairwise into Ya = [a b c d | a b c d] (each half a partial sum of its
// row). Clobbers Yc.
#define HADD4(Ya, Yb, Yc, Yd) \
	VPHADDD Yb, Ya, Ya; \
	VPHADDD Yd, Yc, Yc; \
	VPHADDD Yc, Ya, Ya

// OUT8 stores the 8 rows' results: each half of the accumulators Yl (rows
// 0-3) and Yh (rows 4-7) summed, into out (AX). Clobbers X10.
#define OUT8(Yl, Xl, Yh, Xh) \
	VEXTRACTF128 $1, Yl, X10; \
	VADDPS X10, Xl, Xl; \
	VMOVUPS Xl, (AX); \
	VEXTRACTF128 $1, Yh, X10; \
	VADDPS X10, Xh, Xh; \
	VMOVUPS Xh, 16(AX)`

// rows8 addresses the 8 activation rows of a ×8 tile: DI, R12 bytes
// apart, rows 4-7 from R11 = DI + 4·R12 (R13 = 3·R12).
var rows8 = [8]string{"(DI)", "(DI)(R12*1)", "(DI)(R12*2)", "(DI)(R13*1)", "(R11)", "(R11)(R12*1)", "(R11)(R12*2)", "(R11)(R13*1)"}

// rowAt returns activation row r's operand at byte offset o.
func rowAt(r, o int) string {
	if o == 0 {
		return rows8[r]
	}
	return fmt.Sprintf("%d%s", o, rows8[r])
}

// prolog8 loads the arguments every ×8 tile takes first.
func (a *asm) prolog8() {
	a.code(`
MOVQ w+0(FP), SI
MOVQ xq+8(FP), DI
MOVQ xs+16(FP), R12
LEAQ (R12)(R12*2), R13
LEAQ (DI)(R12*4), R11
MOVQ xd8+24(FP), DX`)
}

// q8_0x8 writes dotQ8_0x8AVX2 (or, q4, dotQ4_0x8AVX2): per 34-byte
// block the signed weights (Y9; Q4_0: the 18-byte block's nibbles unpacked
// to bytes, low nibbles in the low lane, minus 8) and |w| (Y10) meet each
// row's block as in the ×4 tiles (VPSIGNB on the activations, VPMADDUBSW,
// VPMADDWD with ones), the 4 rows' int32 lanes are added horizontally
// (HADD4) and the block is folded by one conversion and one FMA per 4
// rows with d_w·[d_x of the rows]. Q4_0 first adds the two halves as well
// and accumulates each row's whole block sum in one chain, as ggml's
// repacked Q4_0 kernels (and dotQ4_0Go) do, so its rows equal the plain
// kernel's bit for bit.
func (a *asm) q8_0x8(q4 bool) {
	name, lbl, bb := "dotQ8_0x8AVX2", "q80x8loop", 34
	if q4 {
		name, lbl, bb = "dotQ4_0x8AVX2", "q40x8loop", 18
	}
	a.l(``)
	a.l(`// func %s(w *byte, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-48`, name)
	a.prolog8()
	a.code(`
MOVQ nb+32(FP), CX
VPCMPEQW Y15, Y15, Y15
VPSRLW $15, Y15, Y15
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1`)
	a.l("%s:", lbl)
	a.code(`
VPBROADCASTW (SI), X8
VCVTPH2PS X8, Y8`)
	if q4 {
		a.code(`
VMOVDQU 2(SI), X9
VPSRLW $4, X9, X10
VINSERTI128 $1, X10, Y9, Y9
VPAND t8mask0f<>(SB), Y9, Y9
VPSUBB t8mask08<>(SB), Y9, Y9`)
	} else {
		a.code("VMOVDQU 2(SI), Y9")
	}
	a.code("VPABSB Y9, Y10")
	t := []int{2, 3, 4, 5, 6, 7, 11, 12}
	for r := 0; r < 8; r++ {
		a.l("\tVMOVDQU %s, Y%d", rows8[r], t[r])
		a.l("\tVPSIGNB Y9, Y%d, Y%d", t[r], t[r])
		a.l("\tVPMADDUBSW Y%d, Y10, Y%d", t[r], t[r])
		a.l("\tVPMADDWD Y15, Y%d, Y%d", t[r], t[r])
	}
	a.code(`
HADD4(Y2, Y3, Y4, Y5)
HADD4(Y6, Y7, Y11, Y12)`)
	if q4 {
		// ggml's order for Q4_0 (dotQ4_0Go): the block's whole integer
		// sum, then one fused multiply-add per row
		a.code(`
VEXTRACTI128 $1, Y2, X13
VPADDD X13, X2, X2
VEXTRACTI128 $1, Y6, X14
VPADDD X14, X6, X6
VCVTDQ2PS X2, X2
VCVTDQ2PS X6, X6
VMULPS (DX), X8, X13
VMULPS 32(DX), X8, X14
VFMADD231PS X2, X13, X0
VFMADD231PS X6, X14, X1`)
	} else {
		a.code(`
VCVTDQ2PS Y2, Y2
VCVTDQ2PS Y6, Y6
VMULPS (DX), Y8, Y13
VMULPS 32(DX), Y8, Y14
VFMADD231PS Y2, Y13, Y0
VFMADD231PS Y6, Y14, Y1`)
	}
	a.l("\tADDQ $%d, SI", bb)
	a.code(`
ADDQ $32, DI
ADDQ $32, R11
ADDQ $64, DX
DECQ CX`)
	a.l("\tJNZ %s", lbl)
	a.code(`
MOVQ out+40(FP), AX
OUT8(Y0, X0, Y1, X1)
VZEROUPPER
RET`)
}

// kFold8 folds a k-quant super-block's integer sums (Y0-Y7, row r in Yr)
// into the float accumulators Y8 (rows 0-3) and Y9 (rows 4-7): the sums
// times d·[d_x of the rows]; mins (Q4_K: Σ_j m_j·(Σx)_j, from the rows'
// 16-value sums at BX / R10, R15 bytes apart, R9 = 3·R15, and the mins
// arranged [m0-3 m0-3 | m4-7 m4-7] at 32(SP)) times dmin·[d_x].
func kFold8(mins bool) string {
	var b strings.Builder
	b.WriteString("HADD4(Y0, Y1, Y2, Y3)\nHADD4(Y4, Y5, Y6, Y7)\nVCVTDQ2PS Y0, Y0\nVCVTDQ2PS Y4, Y4\n")
	if mins {
		for h, base := range []string{"BX", "R10"} {
			lo, hi := 1+4*h, 2+4*h
			fmt.Fprintf(&b, `VMOVDQU (%[1]s), Y%[2]d
VPHADDW (%[1]s)(R15*1), Y%[2]d, Y%[2]d
VPMADDWD 32(SP), Y%[2]d, Y%[2]d
VMOVDQU (%[1]s)(R15*2), Y%[3]d
VPHADDW (%[1]s)(R9*1), Y%[3]d, Y%[3]d
VPMADDWD 32(SP), Y%[3]d, Y%[3]d
VPHADDD Y%[3]d, Y%[2]d, Y%[2]d
VCVTDQ2PS Y%[2]d, Y%[2]d
`, base, lo, hi)
		}
		b.WriteString(`MOVL (SI), AX
VMOVD AX, X10
VCVTPH2PS X10, X10
VBROADCASTSS X10, Y11
VMOVSHDUP X10, X10
VBROADCASTSS X10, Y10
VMULPS (DX), Y11, Y12
VMULPS (DX), Y10, Y13
VFMADD231PS Y0, Y12, Y8
VFNMADD231PS Y1, Y13, Y8
VMULPS 32(DX), Y11, Y12
VMULPS 32(DX), Y10, Y13
VFMADD231PS Y4, Y12, Y9
VFNMADD231PS Y5, Y13, Y9`)
		return b.String()
	}
	return b.String()
}

// kx8 writes dotQ4Kx8AVX2 (or, q5, dotQ5Kx8AVX2): per 144-byte (176)
// super-block the scales and mins are unpacked once (KSCALES8), each
// group's 64 nibbles once (Q5_K: with their fifth bits from qh, held in
// Y8), and every row adds sc·(q·x) of its 8 sub-blocks into its int32
// lanes (Y0-Y7), folded by kFold8 (Q5_K: with the float accumulators at
// 64(SP) and 96(SP) between super-blocks, as Y8 holds qh).
func (a *asm) kx8(q5 bool) {
	name, lbl, bb, qs := "dotQ4Kx8AVX2", "q4kx8loop", 144, 16
	if q5 {
		name, lbl, bb, qs = "dotQ5Kx8AVX2", "q5kx8loop", 176, 48
	}
	a.l(``)
	a.l(`// func %s(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $128-64`, name)
	a.prolog8()
	a.code(`
MOVQ bs+32(FP), BX
MOVQ bss+40(FP), R15
SHLQ $1, R15
LEAQ (R15)(R15*2), R9
LEAQ (BX)(R15*4), R10
MOVQ nb+48(FP), CX
` + broadcast(0x0f0f0f0f, 14) + `
VXORPS Y8, Y8, Y8
VXORPS Y9, Y9, Y9`)
	if q5 {
		a.code("VMOVUPS Y8, 64(SP)\nVMOVUPS Y8, 96(SP)")
	}
	a.l("%s:", lbl)
	a.code("KSCALES8")
	if q5 {
		a.code("VMOVDQU 16(SI), Y8")
	}
	for g := 0; g < 4; g++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VPSRLW $4, Y10, Y11
VPAND Y14, Y10, Y10
VPAND Y14, Y11, Y11`, qs+32*g))
		if q5 {
			a.code(q5bits("Y8", 4-2*g, "Y15", "t8mask10<>(SB)", "Y10"))
			a.code(q5bits("Y8", 3-2*g, "Y15", "t8mask10<>(SB)", "Y11"))
		}
		a.kGroup8("SP", g)
	}
	if q5 {
		a.code("VMOVUPS 64(SP), Y8\nVMOVUPS 96(SP), Y9")
	}
	a.code(kFold8(true))
	if q5 {
		a.code("VMOVUPS Y8, 64(SP)\nVMOVUPS Y9, 96(SP)")
	}
	a.l("\tADDQ $%d, SI", bb)
	a.code(`
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $32, BX
ADDQ $32, R10
DECQ CX`)
	a.l("\tJNZ %s", lbl)
	a.code(`
MOVQ out+56(FP), AX
OUT8(Y8, X8, Y9, X9)
VZEROUPPER
RET`)
}

// kGroup8 writes one group g (0-3) of a Q4_K/Q5_K super-block against 8
// activation rows: the group's two sub-block scales broadcast as words
// from 4g(base) and 4g+2(base), its 64 values (low nibbles in Y10, high in
// Y11) multiplied with each row's 64 int8 values and the scaled int32
// sums added into the row's lanes Y0-Y7 (set by group 0).
func (a *asm) kGroup8(base string, g int) {
	a.code(fmt.Sprintf(`
VPBROADCASTW %d(%s), Y12
VPBROADCASTW %d(%s), Y13`, 4*g, base, 4*g+2, base))
	for r := 0; r < 8; r++ {
		a.l("\tVPMADDUBSW %s, Y10, Y15", rowAt(r, 64*g))
		if g == 0 {
			a.l("\tVPMADDWD Y12, Y15, Y%d", r)
		} else {
			a.l("\tVPMADDWD Y12, Y15, Y15")
			a.l("\tVPADDD Y15, Y%d, Y%d", r, r)
		}
		a.l("\tVPMADDUBSW %s, Y11, Y15", rowAt(r, 64*g+32))
		a.l("\tVPMADDWD Y13, Y15, Y15")
		a.l("\tVPADDD Y15, Y%d, Y%d", r, r)
	}
}

// q6Kx8 writes dotQ6Kx8AVX2: per 210-byte super-block each row's int32
// lanes start at −32·Σ_i sc_i·(Σx)_i (the offset of the 6-bit values, from
// the rows' 16-value sums at BX / R10 and the scales times −32 as words at
// 0(SP)), each 32 values are decoded once (ql nibble | qh bits, 0-63) and
// meet every row with the pair of 16-value scales, and the super-block is
// folded by kFold8 with d (no mins); the float accumulators live at
// 64(SP) and 96(SP), Y8 and Y9 serving the decode.
func (a *asm) q6Kx8() {
	a.l(``)
	a.l(`// func dotQ6Kx8AVX2(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ6Kx8AVX2(SB), NOSPLIT, $128-64`)
	a.prolog8()
	a.code(`
MOVQ bs+32(FP), BX
MOVQ bss+40(FP), R15
SHLQ $1, R15
LEAQ (R15)(R15*2), R9
LEAQ (BX)(R15*4), R10
MOVQ nb+48(FP), CX
` + broadcast(0x0f0f0f0f, 14) + `
VXORPS Y8, Y8, Y8
VMOVUPS Y8, 64(SP)
VMOVUPS Y8, 96(SP)
q6kx8loop:
VPMOVSXBW 192(SI), Y12
VMOVDQU Y12, 0(SP)
VPSLLW $5, Y12, Y12
VPXOR Y13, Y13, Y13
VPSUBW Y12, Y13, Y13`)
	bsRow := []string{"(BX)", "(BX)(R15*1)", "(BX)(R15*2)", "(BX)(R9*1)", "(R10)", "(R10)(R15*1)", "(R10)(R15*2)", "(R10)(R9*1)"}
	for r := 0; r < 8; r++ {
		a.l("\tVPMADDWD %s, Y13, Y%d", bsRow[r], r)
	}
	// two halves of 128 values: ql at 64h, qh at 128+32h, activations
	// at 128h, scales at words 8h; four 32-value chunks each
	for h := 0; h < 2; h++ {
		ql, qh, xo, so := 64*h, 128+32*h, 128*h, 16*h
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VMOVDQU %d(SI), Y11
VMOVDQU %d(SI), Y13`, ql, ql+32, qh))
		for c := 0; c < 4; c++ {
			switch c {
			case 0:
				a.code("VPAND Y14, Y10, Y8\nVPSLLW $4, Y13, Y9")
			case 1:
				a.code("VPAND Y14, Y11, Y8\nVPSLLW $2, Y13, Y9")
			case 2:
				a.code("VPSRLW $4, Y10, Y8\nVPAND Y14, Y8, Y8\nVPAND t8mask30<>(SB), Y13, Y9")
			case 3:
				a.code("VPSRLW $4, Y11, Y8\nVPAND Y14, Y8, Y8\nVPSRLW $2, Y13, Y9")
			}
			if c != 2 {
				a.l("\tVPAND t8mask30<>(SB), Y9, Y9")
			}
			a.code(fmt.Sprintf(`
VPOR Y9, Y8, Y8
VPBROADCASTD %d(SP), Y12
VPSHUFB t8shuf<>(SB), Y12, Y12`, so+4*c))
			for r := 0; r < 8; r++ {
				a.l("\tVPMADDUBSW %s, Y8, Y15", rowAt(r, xo+32*c))
				a.l("\tVPMADDWD Y12, Y15, Y15")
				a.l("\tVPADDD Y15, Y%d, Y%d", r, r)
			}
		}
	}
	a.code(`
HADD4(Y0, Y1, Y2, Y3)
HADD4(Y4, Y5, Y6, Y7)
VCVTDQ2PS Y0, Y0
VCVTDQ2PS Y4, Y4
VPBROADCASTW 208(SI), X10
VCVTPH2PS X10, Y10
VMULPS (DX), Y10, Y12
VFMADD213PS 64(SP), Y12, Y0
VMOVUPS Y0, 64(SP)
VMULPS 32(DX), Y10, Y12
VFMADD213PS 96(SP), Y12, Y4
VMOVUPS Y4, 96(SP)
ADDQ $210, SI
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $32, BX
ADDQ $32, R10
DECQ CX
JNZ q6kx8loop
MOVQ out+56(FP), AX
VMOVUPS 64(SP), Y8
VMOVUPS 96(SP), Y9
OUT8(Y8, X8, Y9, X9)
VZEROUPPER
RET`)
}
