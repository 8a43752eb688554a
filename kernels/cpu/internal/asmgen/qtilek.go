package asmgen

import "fmt"

// qtilekFile writes qtilek_amd64.s: the Q4_K ×8 tile on the activation
// rows' precomputed 32-value sums (see kernels/cpu/qtilek.go).
func qtilekFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q4_K ×8 tile with the mins folded from precomputed activation sums
// (see qtilek.go): the same operations as dotQ4Kx8AVX2 of qtile8_amd64.s
// in the same order, except that each pair of rows' 32-value sums, which
// dotQ4Kx8AVX2 forms per weight row and super-block with VPHADDW, is read
// from actQ.bp, formed once per MatMul.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.kx8p()
	a.kScales()
	a.kx8s()
	return a.b.String()
}

// kx8p writes dotQ4Kx8PAVX2: dotQ4Kx8AVX2 (kx8 in qtile8.go) with the
// rows' 32-value sums of each super-block read from bp, 128 bytes per
// super-block: rows 0-1, 2-3, 4-5, 6-7 as the VPHADDW of their 16-value
// sums leaves them ([r0 s0-3, r1 s0-3 | r0 s4-7, r1 s4-7] as words).
func (a *asm) kx8p() {
	a.l(``)
	a.l(`// func dotQ4Kx8PAVX2(w *byte, xq *int8, xs int, xd8 *float32, bp *int16, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ4Kx8PAVX2(SB), NOSPLIT, $64-56`)
	a.prolog8()
	a.code(`
MOVQ bp+32(FP), BX
MOVQ nb+40(FP), CX
` + broadcast(0x0f0f0f0f, 14) + `
VXORPS Y8, Y8, Y8
VXORPS Y9, Y9, Y9
q4kx8ploop:
KSCALES8`)
	a.q4kx8Sums("SP", 32)
	a.code(`
MOVL (SI), AX
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
VFNMADD231PS Y5, Y13, Y9
ADDQ $144, SI
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $128, BX
DECQ CX
JNZ q4kx8ploop
MOVQ out+48(FP), AX
OUT8(Y8, X8, Y9, X9)
VZEROUPPER
RET`)
}

// kScales writes q4kScalesAVX2: the scales, mins, d and dmin of rows
// Q4_K weight rows (rb bytes apart, nb super-blocks each) unpacked into
// sc, 64 bytes per super-block: the eight scales as words (KSCALES8's
// 0(SP)), the eight mins as words [m0-3 m0-3 | m4-7 m4-7] (its 32(SP)),
// d and dmin as float32, 8 bytes of padding.
func (a *asm) kScales() {
	a.l(``)
	a.l(`// func q4kScalesAVX2(w *byte, rb int, rows int, nb int, sc *byte)`)
	a.l(`TEXT ·q4kScalesAVX2(SB), NOSPLIT, $0-40`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ rb+8(FP), R9
MOVQ rows+16(FP), BX
MOVQ nb+24(FP), R10
MOVQ sc+32(FP), DI
` + broadcast(0x0f0f0f0f, 14) + `
q4kscrow:
MOVQ SI, DX
MOVQ R10, CX
q4kscblk:
VMOVDQU 4(DX), X0
VPAND t8mask3f<>(SB), X0, X1
VPSRLW $2, X0, X2
VPAND t8mask30<>(SB), X2, X2
VPAND X14, X0, X3
VPSRLW $4, X0, X4
VPAND X14, X4, X4
VPUNPCKHDQ X4, X3, X3
VPOR X3, X2, X2
VPUNPCKLDQ X2, X1, X1
VPMOVZXBW X1, X2
VMOVDQU X2, 0(DI)
VPSRLDQ $8, X1, X1
VPMOVZXBW X1, X1
VPUNPCKLQDQ X1, X1, X2
VPUNPCKHQDQ X1, X1, X1
VINSERTI128 $1, X1, Y2, Y2
VMOVDQU Y2, 16(DI)
MOVL (DX), AX
VMOVD AX, X0
VCVTPH2PS X0, X0
VMOVQ X0, 48(DI)
ADDQ $144, DX
ADDQ $64, DI
DECQ CX
JNZ q4kscblk
ADDQ R9, SI
DECQ BX
JNZ q4kscrow
VZEROUPPER
RET`)
}

// kx8s writes dotQ4Kx8SAVX2: dotQ4Kx8PAVX2 with the weight row's scales,
// mins, d and dmin read unpacked from sc (q4kScalesAVX2's layout) instead
// of unpacked per call: the same values in the same operations.
func (a *asm) kx8s() {
	a.l(``)
	a.l(`// func dotQ4Kx8SAVX2(w *byte, xq *int8, xs int, xd8 *float32, bp *int16, sc *byte, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ4Kx8SAVX2(SB), NOSPLIT, $0-64`)
	a.prolog8()
	a.code(`
MOVQ bp+32(FP), BX
MOVQ sc+40(FP), R8
MOVQ nb+48(FP), CX
` + broadcast(0x0f0f0f0f, 14) + `
VXORPS Y8, Y8, Y8
VXORPS Y9, Y9, Y9
q4kx8sloop:`)
	a.q4kx8Sums("R8", 16)
	a.code(`
VBROADCASTSS 48(R8), Y11
VBROADCASTSS 52(R8), Y10
VMULPS (DX), Y11, Y12
VMULPS (DX), Y10, Y13
VFMADD231PS Y0, Y12, Y8
VFNMADD231PS Y1, Y13, Y8
VMULPS 32(DX), Y11, Y12
VMULPS 32(DX), Y10, Y13
VFMADD231PS Y4, Y12, Y9
VFNMADD231PS Y5, Y13, Y9
ADDQ $144, SI
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $128, BX
ADDQ $64, R8
DECQ CX
JNZ q4kx8sloop
MOVQ out+56(FP), AX
OUT8(Y8, X8, Y9, X9)
VZEROUPPER
RET`)
}

// q4kx8Sums writes the ×8 tiles' products of one Q4_K super-block: the
// eight sub-blocks' integer sums of 8 activation rows, scaled by the
// sub-block scales broadcast from 0(base) (words), folded into Y0 and Y4
// as floats, and the mins' products with the rows' 32-value sums (BX)
// from minsOff(base) into Y1 and Y5.
func (a *asm) q4kx8Sums(base string, minsOff int) {
	for g := 0; g < 4; g++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VPSRLW $4, Y10, Y11
VPAND Y14, Y10, Y10
VPAND Y14, Y11, Y11`, 16+32*g))
		a.kGroup8(base, g)
	}
	a.code(fmt.Sprintf(`
HADD4(Y0, Y1, Y2, Y3)
HADD4(Y4, Y5, Y6, Y7)
VCVTDQ2PS Y0, Y0
VCVTDQ2PS Y4, Y4
VMOVDQU %d(%s), Y15
VPMADDWD (BX), Y15, Y1
VPMADDWD 32(BX), Y15, Y2
VPHADDD Y2, Y1, Y1
VCVTDQ2PS Y1, Y1
VPMADDWD 64(BX), Y15, Y5
VPMADDWD 96(BX), Y15, Y6
VPHADDD Y6, Y5, Y5
VCVTDQ2PS Y5, Y5`, minsOff, base))
}
