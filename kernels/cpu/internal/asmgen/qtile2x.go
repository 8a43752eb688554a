package asmgen

import "fmt"

// qtile2x writes qtile2x_amd64.s: the 2×4 Q4_K tile of the batched paths,
// two weight rows against 4 activation rows. Each 32-byte activation load
// feeds both weight rows, so a block of weight rows reads its activation
// rows from L1 or L2 half as often as the ×8 tile does; each decoded
// sub-block of a weight row meets the 4 rows from a register. Its integer
// sums are the ×8 tile's (exact), and it folds them into float with the
// ×8 tile's operations in the ×8 tile's order ([r0-r3 | r0-r3] halves,
// one FMA with d·d_x and one with dmin·d_x per super-block, the same
// final fold), so each of its results equals dotQ4Kx8AVX2's for the same
// weight row and activation row bit for bit.
func qtile2x() string {
	var a asm
	a.header()
	a.lines(`
// The 2×4 Q4_K tile (see qtile2x.go): weight rows at w and w+ws, activation
// rows xs bytes apart; xd8 points at the 4 rows' scales in actQ.d8 (the
// [r0-r3 r0-r3] half of a group of 8 rows, 64 bytes per block), bs at the
// first row's 16-value sums, bss int16s apart.`)
	a.l(``)
	a.lines(`DATA x2mask3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA x2mask3f<>+8(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL x2mask3f<>(SB), RODATA|NOPTR, $16
DATA x2mask30<>+0(SB)/8, $0x3030303030303030
DATA x2mask30<>+8(SB)/8, $0x3030303030303030
GLOBL x2mask30<>(SB), RODATA|NOPTR, $16`)
	a.q4Kx2x4()
	return a.b.String()
}

// kScales2x unpacks the 12 scale bytes of the Q4_K super-block at src+4
// as KSCALES8 of qtile8_amd64.s does, through X0-X4: the eight scales as
// words at sc(SP), the eight mins as words [m0-3 m0-3 | m4-7 m4-7] at
// mn(SP). Needs 0x0f bytes in X14.
func kScales2x(src string, sc, mn int) string {
	return fmt.Sprintf(`VMOVDQU 4%[1]s, X0
VPAND x2mask3f<>(SB), X0, X1
VPSRLW $2, X0, X2
VPAND x2mask30<>(SB), X2, X2
VPAND X14, X0, X3
VPSRLW $4, X0, X4
VPAND X14, X4, X4
VPUNPCKHDQ X4, X3, X3
VPOR X3, X2, X2
VPUNPCKLDQ X2, X1, X1
VPMOVZXBW X1, X2
VMOVDQU X2, %[2]d(SP)
VPSRLDQ $8, X1, X1
VPMOVZXBW X1, X1
VPUNPCKLQDQ X1, X1, X2
VPUNPCKHQDQ X1, X1, X1
VINSERTI128 $1, X1, Y2, Y2
VMOVDQU Y2, %[3]d(SP)`, src, sc, mn)
}

// rows4 addresses the 4 activation rows of a 2×4 tile: DI, R12 bytes
// apart (R13 = 3·R12).
var rows4 = [4]string{"(DI)", "(DI)(R12*1)", "(DI)(R12*2)", "(DI)(R13*1)"}

// q4Kx2x4 writes dotQ4Kx2x4AVX2. Registers in the loop: Y0-Y3 the int32
// lanes of weight row A against activation rows 0-3, Y4-Y7 those of row
// B, Y8/Y9 a decoded sub-block of A/B, Y10/Y11 their scales as words,
// Y12 the activations, Y13/Y15 products, Y14 0x0f bytes. Frame: A's scales
// at 0(SP) and mins at 32(SP), B's at 64(SP) and 96(SP), the float
// accumulators of A and B ([r0-r3 | r0-r3]) at 128(SP) and 160(SP).
func (a *asm) q4Kx2x4() {
	a.l(``)
	a.l(`// func dotQ4Kx2x4AVX2(w *byte, ws int, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ4Kx2x4AVX2(SB), NOSPLIT, $192-72`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ ws+8(FP), R8
MOVQ xq+16(FP), DI
MOVQ xs+24(FP), R12
LEAQ (R12)(R12*2), R13
MOVQ xd8+32(FP), DX
MOVQ bs+40(FP), BX
MOVQ bss+48(FP), R15
SHLQ $1, R15
LEAQ (R15)(R15*2), R9
MOVQ nb+56(FP), CX
` + broadcast(0x0f0f0f0f, 14) + `
VXORPS Y8, Y8, Y8
VMOVUPS Y8, 128(SP)
VMOVUPS Y8, 160(SP)
q4kx2x4loop:`)
	a.code(kScales2x("(SI)", 0, 32))
	a.code(kScales2x("(SI)(R8*1)", 64, 96))
	for g := 0; g < 4; g++ {
		for s := 0; s < 2; s++ {
			src := fmt.Sprintf("%d(SI)", 16+32*g)
			srcB := fmt.Sprintf("%d(SI)(R8*1)", 16+32*g)
			if s == 0 {
				a.l("\tVPAND %s, Y14, Y8", src)
				a.l("\tVPAND %s, Y14, Y9", srcB)
			} else {
				a.l("\tVMOVDQU %s, Y8", src)
				a.l("\tVMOVDQU %s, Y9", srcB)
				a.code("VPSRLW $4, Y8, Y8\nVPSRLW $4, Y9, Y9\nVPAND Y14, Y8, Y8\nVPAND Y14, Y9, Y9")
			}
			a.l("\tVPBROADCASTW %d(SP), Y10", 4*g+2*s)
			a.l("\tVPBROADCASTW %d(SP), Y11", 64+4*g+2*s)
			first := g == 0 && s == 0
			for r := 0; r < 4; r++ {
				a.l("\tVMOVDQU %s, Y12", rowAt4(r, 64*g+32*s))
				a.l("\tVPMADDUBSW Y12, Y8, Y13")
				a.l("\tVPMADDUBSW Y12, Y9, Y15")
				if first {
					a.l("\tVPMADDWD Y10, Y13, Y%d", r)
					a.l("\tVPMADDWD Y11, Y15, Y%d", 4+r)
					continue
				}
				a.l("\tVPMADDWD Y10, Y13, Y13")
				a.l("\tVPMADDWD Y11, Y15, Y15")
				a.l("\tVPADDD Y13, Y%d, Y%d", r, r)
				a.l("\tVPADDD Y15, Y%d, Y%d", 4+r, 4+r)
			}
		}
	}
	// the fold of kFold8 (qtile8.go) for each weight row: the rows'
	// 16-value sums paired (shared by A and B), times each row's mins
	a.code(`
VPHADDD Y1, Y0, Y0
VPHADDD Y3, Y2, Y2
VPHADDD Y2, Y0, Y0
VPHADDD Y5, Y4, Y4
VPHADDD Y7, Y6, Y6
VPHADDD Y6, Y4, Y4
VCVTDQ2PS Y0, Y0
VCVTDQ2PS Y4, Y4
VMOVDQU (BX), Y8
VPHADDW (BX)(R15*1), Y8, Y8
VMOVDQU (BX)(R15*2), Y9
VPHADDW (BX)(R9*1), Y9, Y9
VPMADDWD 32(SP), Y8, Y1
VPMADDWD 32(SP), Y9, Y2
VPHADDD Y2, Y1, Y1
VCVTDQ2PS Y1, Y1
VPMADDWD 96(SP), Y8, Y5
VPMADDWD 96(SP), Y9, Y6
VPHADDD Y6, Y5, Y5
VCVTDQ2PS Y5, Y5
VMOVUPS (DX), Y15
MOVL (SI), AX
VMOVD AX, X10
VCVTPH2PS X10, X10
VBROADCASTSS X10, Y11
VMOVSHDUP X10, X10
VBROADCASTSS X10, Y10
VMULPS Y15, Y11, Y12
VMULPS Y15, Y10, Y13
VMOVUPS 128(SP), Y8
VFMADD231PS Y0, Y12, Y8
VFNMADD231PS Y1, Y13, Y8
VMOVUPS Y8, 128(SP)
MOVL (SI)(R8*1), AX
VMOVD AX, X10
VCVTPH2PS X10, X10
VBROADCASTSS X10, Y11
VMOVSHDUP X10, X10
VBROADCASTSS X10, Y10
VMULPS Y15, Y11, Y12
VMULPS Y15, Y10, Y13
VMOVUPS 160(SP), Y9
VFMADD231PS Y4, Y12, Y9
VFNMADD231PS Y5, Y13, Y9
VMOVUPS Y9, 160(SP)
ADDQ $144, SI
ADDQ $256, DI
ADDQ $64, DX
ADDQ $32, BX
DECQ CX
JNZ q4kx2x4loop
MOVQ out+64(FP), AX
VMOVUPS 128(SP), Y8
VMOVUPS 160(SP), Y9
VEXTRACTF128 $1, Y8, X10
VADDPS X10, X8, X8
VMOVUPS X8, (AX)
VEXTRACTF128 $1, Y9, X10
VADDPS X10, X9, X9
VMOVUPS X9, 16(AX)
VZEROUPPER
RET`)
}

// rowAt4 returns activation row r's operand at byte offset o.
func rowAt4(r, o int) string {
	if o == 0 {
		return rows4[r]
	}
	return fmt.Sprintf("%d%s", o, rows4[r])
}
