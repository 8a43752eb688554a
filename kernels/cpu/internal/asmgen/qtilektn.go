package asmgen

import "fmt"

// qtilektnFile writes qtilektn_amd64.s: the Q4_K tile on transposed
// super-blocks for any number of groups of 8 activation rows (see
// kernels/cpu/qtilektn.go).
func qtilektnFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q4_K tile on transposed super-blocks for any number of groups of 8
// activation rows (see qtilektn.go): each weight super-block is decoded,
// transposed and its scales unpacked once (as in qtilekt_amd64.s), then
// meets every group in turn; each group's 4-row halves are computed and
// folded as dotQ4KTx8AVX2 does (the same instructions in the same order),
// into float accumulators in memory (acc, 16 floats per weight row and
// group), so the results equal dotQ4KTx8AVX2's, and dotQ4Kx8PAVX2's, bit
// for bit.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.kxtn()
	return a.b.String()
}

// kxtn writes dotQ4KTxNAVX2: the products of rows Q4_K weight rows (rb
// bytes apart) with 8·groups activation rows, stored into out (os floats
// apart per activation row, one float per weight row). The loop runs over
// super-blocks, then weight rows, then groups, so that a super-block's
// transposed activations (2 KiB per group) stay in L1 for all the weight
// rows (each row's super-block 4 ahead prefetched: the rows are ktnRows
// interleaved streams); acc holds 16 floats per weight row and group
// (row-major). Frame: KSCALES8's scales at 0(SP) and mins at 32(SP), d
// and dmin at 64(SP), the weight rows left at 72(SP). Registers: R8 the
// super-block of weight row 0, SI that of the current weight row, CX the
// super-blocks left, DI, DX and BX the super-block's transposed
// activations, activation scales (xd8) and 32-value sums (bp) of group 0;
// per group R11, R12 and R13 (groups R14 = gs, R15 = 64·nb and 2·R15
// bytes apart; xt's super-blocks ss bytes apart), R10 its accumulators
// and R9 the groups left. Y8-Y15 hold the transposed super-block, Y7 the
// scales as words.
func (a *asm) kxtn() {
	a.l(``)
	a.l(`// func %s(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)`, a.k4Name("dotQ4KTxN"))
	a.l(`TEXT ·%s(SB), NOSPLIT, $96-104`, a.k4Name("dotQ4KTxN"))
	a.code(`
MOVQ nb+48(FP), R15
MOVQ gs+88(FP), R14
SHLQ $6, R15
MOVQ acc+80(FP), R10
MOVQ rows+16(FP), R9
IMULQ groups+72(FP), R9`)
	a.ktnHead("q4ktn", "bp", 40, 48, 80)
	a.code(`
PREFETCHT0 576(SI)
PREFETCHT0 640(SI)
PREFETCHT0 704(SI)`)
	a.kxtDecode()
	a.code(`
MOVQ DI, R11
MOVQ DX, R12
MOVQ BX, R13
MOVQ groups+72(FP), R9`)
	a.l("q4ktngroup:")
	for half := 0; half < 2; half++ {
		act := func(r, v int) string { return fmt.Sprintf("%d(R11)", (4*half+r)*256+32*v) }
		a.kxtHalf(act, fmt.Sprintf("%d(R13)", 64*half), fmt.Sprintf("%d(R13)", 64*half+32),
			fmt.Sprintf("%d(R12)", 32*half), fmt.Sprintf("%d(R10)", 32*half))
	}
	a.code(`
ADDQ R14, R11
ADDQ R15, R12
ADDQ R15, R13
ADDQ R15, R13
ADDQ $64, R10
DECQ R9
JNZ q4ktngroup
ADDQ rb+8(FP), SI
DECQ 72(SP)
JNZ q4ktnrow
ADDQ $144, R8
ADDQ ss+96(FP), DI
ADDQ $64, DX
ADDQ $128, BX
DECQ CX
JNZ q4ktnloop`)
	// each 4 rows' two halves summed as OUT8 does, then stored
	a.ktnStore("q4ktn", 56, 64, 72, 80)
}

// ktnStore writes the epilogue of the transposed-tile kernels
// (dotQ4KTxNAVX2, dotQ6KTxNAVX2): per weight row, for each group of 8
// activation rows, the two halves of each 4 rows' sums (acc, 64 bytes per
// group and row) are added and stored one activation row at a time, os
// floats apart; then VZEROUPPER and RET. The arguments are the frame
// offsets of out, os, groups and acc (rows is at 16), and prefix names
// the labels.
func (a *asm) ktnStore(prefix string, outOff, osOff, groupsOff, accOff int) {
	a.code(fmt.Sprintf(`
MOVQ os+%d(FP), DX
SHLQ $2, DX
MOVQ out+%d(FP), R11
MOVQ acc+%d(FP), R10
MOVQ rows+16(FP), CX`, osOff, outOff, accOff))
	a.l("%sstorerow:", prefix)
	a.code(fmt.Sprintf(`
MOVQ R11, DI
MOVQ groups+%d(FP), R9`, groupsOff))
	a.l("%sstore:", prefix)
	for s := 0; s < 2; s++ {
		a.code(fmt.Sprintf(`
VMOVUPS %d(R10), Y8
VEXTRACTF128 $1, Y8, X9
VADDPS X9, X8, X8`, 32*s))
		for i := 0; i < 4; i++ {
			if i == 0 {
				a.l("\tVMOVSS X8, (DI)")
			} else {
				a.l("\tVEXTRACTPS $%d, X8, (DI)", i)
			}
			a.l("\tADDQ DX, DI")
		}
	}
	a.code(fmt.Sprintf(`
ADDQ $64, R10
DECQ R9
JNZ %sstore
ADDQ $4, R11
DECQ CX
JNZ %sstorerow
VZEROUPPER
RET`, prefix, prefix))
}

// ktnHead writes the part of the transposed-tile kernels (dotQ4KTxNAVX2,
// dotQ6KTxNAVX2) between their set-up and a row's body: the accumulators
// (acc, R10; R9 = rows × groups blocks of 64 bytes) zeroed, w, xt, xd8,
// the scales (named scales at frame offset scalesOff) and nb (nbOff)
// loaded into R8, DI, DX, BX and CX, then the super-block loop's head
// (prefix+"loop": SI at the block's first row, R10 at acc, the row count
// at 72(SP)) and the row label prefix+"row".
func (a *asm) ktnHead(prefix, scales string, scalesOff, nbOff, accOff int) {
	a.l("\tVXORPS Y0, Y0, Y0")
	a.l("%szero:", prefix)
	a.code(fmt.Sprintf(`
VMOVUPS Y0, (R10)
VMOVUPS Y0, 32(R10)
ADDQ $64, R10
DECQ R9
JNZ %szero
MOVQ w+0(FP), R8
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ %s+%d(FP), BX
MOVQ nb+%d(FP), CX`, prefix, scales, scalesOff, nbOff))
	a.l("%sloop:", prefix)
	a.code(fmt.Sprintf(`
MOVQ R8, SI
MOVQ acc+%d(FP), R10
MOVQ rows+16(FP), R9
MOVQ R9, 72(SP)`, accOff))
	a.l("%srow:", prefix)
}
