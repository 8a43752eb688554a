package asmgen

import "fmt"

// q6vFile writes q6v_amd64.s: the AVX-512 VNNI twin of dotQ6KTxNAVX2
// (see kernels/cpu/q6v.go).
func q6vFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q6_K tile on transposed super-blocks for any number of groups of 8
// activation rows on AVX-512 VNNI (see q6v.go): dotQ6KTxNAVX2's
// operations on two weight rows at once, one per 256-bit half of the Z
// registers. Each row's super-block is decoded and transposed as
// dotQ6KTxNAVX2 does (q6tnDecode), the pair joined into Z8-Z15, and each
// 32-byte chunk of activations is broadcast to both halves, so that one
// VPMADDUBSW serves both weight rows; VPDPWSSD applies the scales and adds
// in one instruction. Every 32-bit lane sums exactly the products the
// AVX2 kernel's lane sums (word sums exact as there, no saturation), the
// lanes of 4 activation rows are folded by unpacks (VPHADDD has no EVEX
// form) into the same integer sums as HADD4, and the float fold is the
// AVX2 kernel's per element: the results equal dotQ6KTxNAVX2's bit for bit.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.lines(q6tnPermData)
	a.q6v()
	return a.b.String()
}

// q6v writes dotQ6KTxNVNNI: dotQ6KTxNAVX2's products for an even number
// of weight rows (rows), taken in pairs. Its accumulators hold, per pair
// and group, 128 bytes: rows 0-3's 8 floats of the first row, those of the
// second, then the same for rows 4-7. Frame as dotQ6KTxNAVX2's (the pairs
// left at 72(SP)); registers as there, and Z7 the pair's scales as words,
// Z25 the scales times −32, Z26 d (8 floats per row), Z16-Z24 the first
// row's decoded super-block while the second is decoded.
func (a *asm) q6v() {
	a.l(``)
	a.l(`// func dotQ6KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bs *int16, bsr int, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)`)
	a.l(`TEXT ·dotQ6KTxNVNNI(SB), NOSPLIT, $96-112`)
	a.code(`
MOVQ nb+56(FP), R15
SHLQ $6, R15
MOVQ R15, 80(SP)
MOVQ gs+96(FP), R14
MOVQ bsr+48(FP), AX
MOVQ acc+88(FP), R10
MOVQ rows+16(FP), R9
LEAQ -1(R9), R15
IMULQ rb+8(FP), R15
ADDQ $840, R15
MOVQ R15, 88(SP)
IMULQ groups+80(FP), R9
VXORPS Y0, Y0, Y0`)
	a.l("q6vzero:")
	a.code(`
VMOVUPS Y0, (R10)
VMOVUPS Y0, 32(R10)
ADDQ $64, R10
DECQ R9
JNZ q6vzero
MOVQ w+0(FP), R8
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ bs+40(FP), BX
MOVQ nb+56(FP), CX`)
	a.l("q6vloop:")
	a.code(`
MOVQ R8, SI
MOVQ acc+88(FP), R10
MOVQ rows+16(FP), R9
SHRQ $1, R9
MOVQ R9, 72(SP)`)
	a.l("q6vrow:")
	for half := 0; half < 2; half++ {
		// each row's super-block 4 ahead, or in the last 4 the next block
		// of rows' (as dotQ6KTxNAVX2)
		a.code(fmt.Sprintf(`
MOVQ $840, R15
CMPQ CX, $4
JGT q6vpf%d
MOVQ 88(SP), R15`, half))
		a.l("q6vpf%d:", half)
		a.code(`
PREFETCHT0 (SI)(R15*1)
PREFETCHT0 64(SI)(R15*1)
PREFETCHT0 128(SI)(R15*1)
PREFETCHT0 192(SI)(R15*1)`)
		a.q6tnDecode()
		if half == 0 {
			for v := 0; v < 8; v++ {
				a.l("\tVMOVDQU64 Y%d, Y%d", 8+v, 16+v)
			}
			a.code(`
VMOVDQU64 Y7, Y24
VMOVDQU64 0(SP), Y25
VBROADCASTSS 64(SP), Y26
ADDQ rb+8(FP), SI`)
			continue
		}
		for v := 0; v < 8; v++ {
			a.l("\tVINSERTI64X4 $1, Y%d, Z%d, Z%d", 8+v, 16+v, 8+v)
		}
		a.code(`
VINSERTI64X4 $1, Y7, Z24, Z7
VINSERTI64X4 $1, 0(SP), Z25, Z25
VBROADCASTSS 64(SP), Y27
VINSERTF64X4 $1, Y27, Z26, Z26`)
	}
	a.code(`
MOVQ DI, R11
MOVQ DX, R12
MOVQ BX, R13
MOVQ groups+80(FP), R9`)
	a.q6Groups("q6vgroup", 128, func(act func(r, v int) string, bs func(r int) string, half int) {
		a.q6vHalf(act, bs, half, fmt.Sprintf("%d(R12)", 32*half), fmt.Sprintf("%d(R10)", 64*half))
	})
	a.code(`
ADDQ rb+8(FP), SI
DECQ 72(SP)
JNZ q6vrow
ADDQ $210, R8
ADDQ ss+104(FP), DI
ADDQ $64, DX
ADDQ $32, BX
DECQ CX
JNZ q6vloop`)
	a.pairStore("q6v", 64, 72, 80, 88)
}

// q6vHalf writes q6tnHalf's products for a pair of weight rows (Z8-Z15,
// scales Z7, scales times −32 Z25, d Z26): each activation chunk and
// row's 16-value sums broadcast to both halves, the fold's horizontal
// adds by unpacks, the float accumulators of the pair (64 bytes) at acc.
// Clobbers Z0-Z6, Z16, Z17.
func (a *asm) q6vHalf(act func(r, v int) string, bs func(r int) string, half int, xd, acc string) {
	for r := 0; r < 4; r++ {
		if half == 1 && r == 2 {
			a.l("\tLEAQ (R15)(AX*2), R15")
		}
		a.l("\tVBROADCASTI64X4 %s, Z16", act(r, 0))
		a.l("\tVBROADCASTI64X4 %s, Z17", act(r, 1))
		a.l("\tVPMADDUBSW Z16, Z8, Z%d", r)
		a.l("\tVPMADDUBSW Z17, Z9, Z4")
		a.l("\tVPADDW Z4, Z%d, Z%d", r, r)
		a.l("\tVPMADDWD Z7, Z%d, Z%d", r, r)
		for p := 1; p < 4; p++ {
			a.l("\tVBROADCASTI64X4 %s, Z16", act(r, 2*p))
			a.l("\tVBROADCASTI64X4 %s, Z17", act(r, 2*p+1))
			a.l("\tVPMADDUBSW Z16, Z%d, Z4", 8+2*p)
			a.l("\tVPMADDUBSW Z17, Z%d, Z5", 9+2*p)
			a.l("\tVPADDW Z5, Z4, Z4")
			a.l("\tVPDPWSSD Z7, Z4, Z%d", r)
		}
		a.l("\tVBROADCASTI64X4 %s, Z6", bs(r))
		a.l("\tVPDPWSSD Z25, Z6, Z%d", r)
	}
	// per 128-bit lane [a b c d] = the lane sums of rows 0-3 (HADD4's)
	a.code(fmt.Sprintf(`
VPUNPCKLDQ Z1, Z0, Z4
VPUNPCKHDQ Z1, Z0, Z5
VPADDD Z5, Z4, Z0
VPUNPCKLDQ Z3, Z2, Z4
VPUNPCKHDQ Z3, Z2, Z5
VPADDD Z5, Z4, Z2
VPUNPCKLQDQ Z2, Z0, Z4
VPUNPCKHQDQ Z2, Z0, Z5
VPADDD Z5, Z4, Z0
VCVTDQ2PS Z0, Z0
VBROADCASTF64X4 %s, Z4
VMULPS Z4, Z26, Z4
VMOVUPS %s, Z6
VFMADD231PS Z0, Z4, Z6
VMOVUPS Z6, %s`, xd, acc, acc))
}

// pairStore writes the epilogue of the pair kernels (dotQ6KTxNVNNI,
// dotQ5KTxNVNNI), ktnStore's for the pairs' accumulators: per pair and
// group the first row's halves at 0 and 64, the second's at 32 and 96,
// each 4 rows' two lanes added and stored one activation row at a time
// (os floats apart), the second row one column after the first. The
// arguments are the frame offsets of out, os, groups and acc (rows is at
// 16, even), and prefix names the labels.
func (a *asm) pairStore(prefix string, outOff, osOff, groupsOff, accOff int) {
	a.code(fmt.Sprintf(`
MOVQ os+%d(FP), DX
SHLQ $2, DX
MOVQ out+%d(FP), R11
MOVQ acc+%d(FP), R10
MOVQ rows+16(FP), CX
SHRQ $1, CX`, osOff, outOff, accOff))
	a.l("%sstorerow:", prefix)
	a.code(fmt.Sprintf(`
MOVQ R11, DI
MOVQ groups+%d(FP), R9`, groupsOff))
	a.l("%sstore:", prefix)
	for s := 0; s < 2; s++ {
		a.code(fmt.Sprintf(`
VMOVUPS %d(R10), Y8
VEXTRACTF128 $1, Y8, X9
VADDPS X9, X8, X8
VMOVUPS %d(R10), Y10
VEXTRACTF128 $1, Y10, X11
VADDPS X11, X10, X10`, 64*s, 64*s+32))
		for i := 0; i < 4; i++ {
			if i == 0 {
				a.l("\tVMOVSS X8, (DI)")
				a.l("\tVMOVSS X10, 4(DI)")
			} else {
				a.l("\tVEXTRACTPS $%d, X8, (DI)", i)
				a.l("\tVEXTRACTPS $%d, X10, 4(DI)", i)
			}
			a.l("\tADDQ DX, DI")
		}
	}
	a.code(fmt.Sprintf(`
ADDQ $128, R10
DECQ R9
JNZ %sstore
ADDQ $8, R11
DECQ CX
JNZ %sstorerow
VZEROUPPER
RET`, prefix, prefix))
}
