package asmgen

import (
	"fmt"
	"strings"
)

// q6tilenFile writes q6tilen_amd64.s: the Q6_K tile on transposed
// super-blocks for any number of groups of 8 activation rows (see
// kernels/cpu/q6tilen.go).
func q6tilenFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q6_K tile on transposed super-blocks for any number of groups of 8
// activation rows (see q6tilen.go): each weight super-block's 256 6-bit
// values are decoded into its 8 chunks of 32 values and transposed as 8×8
// words per 128-bit lane (as the Q4_K tiles of qtilekt_amd64.s do), so
// that word w of lane l of every vector belongs to sub-block 2w+l; the
// activations come in the same order (actQ.kt). A row's products of two
// chunks add as words (exact: |sum| ≤ 4·63·128 < 2^15) and one VPMADDWD
// applies the 16 scales (even sub-blocks in the low lane, odd in the high
// one, as dotQ6Kx8AVX2's lanes hold them), the −32·scale offset is
// dotQ6Kx8AVX2's (natural order, sub-blocks 0-7 in the low lane), so each
// 128-bit lane's integer sum, and the fold after it, are dotQ6Kx8AVX2's:
// the results equal it bit for bit. The super-block is decoded once per
// weight row and meets every group in turn, into float accumulators in
// memory (acc, 16 floats per weight row and group).`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.lines(q6tnPermData)
	a.q6tn()
	a.transposeKRow()
	return a.b.String()
}

// q6tnPermData defines q6tnperm, which picks a super-block's 16 scale
// bytes as [0 2 4 ... 14 1 3 ... 15]: widened to words, the even
// sub-blocks' scales in the low lane and the odd ones' in the high lane.
const q6tnPermData = `
// q6tnperm picks a super-block's 16 scale bytes as [0 2 4 ... 14 1 3 ...
// 15]: widened to words, the even sub-blocks' scales in the low lane and
// the odd ones' in the high lane.
DATA q6tnperm<>+0(SB)/8, $0x0e0c0a0806040200
DATA q6tnperm<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q6tnperm<>(SB), RODATA|NOPTR, $16`

// transposeKRow writes transposeKAVX2: one activation row's nb super-blocks
// (src, 256 bytes each, contiguous) transposed as 8×8 words per 128-bit
// lane (transposeW8, the weights' transposition of the tiles on
// transposed super-blocks) into dst, super-blocks ss bytes apart: the
// layout actQ.transposeK makes.
func (a *asm) transposeKRow() {
	a.l(``)
	a.l(`// func transposeKAVX2(src *int8, dst *int8, nb int, ss int)`)
	a.l(`TEXT ·transposeKAVX2(SB), NOSPLIT, $0-32`)
	a.code(`
MOVQ src+0(FP), SI
MOVQ dst+8(FP), DI
MOVQ nb+16(FP), CX
MOVQ ss+24(FP), DX`)
	a.l("transposekloop:")
	for v := 0; v < 8; v++ {
		a.l("\tVMOVDQU %d(SI), Y%d", 32*v, v)
	}
	a.transposeW8()
	for v := 0; v < 8; v++ {
		a.l("\tVMOVDQU Y%d, %d(DI)", 8+v, 32*v)
	}
	a.code(`
ADDQ $256, SI
ADDQ DX, DI
DECQ CX
JNZ transposekloop
VZEROUPPER
RET`)
}

// q6tn writes dotQ6KTxNAVX2: the products of rows Q6_K weight rows (rb
// bytes apart) with 8·groups activation rows, stored into out (os floats
// apart per activation row, one float per weight row). The loop runs over
// super-blocks, then weight rows, then groups, as dotQ4KTxNAVX2's does
// (each weight row's super-block 4 ahead prefetched, and in the last 4
// super-blocks the next block of rows' first ones: at 2048 values a row
// has 8, and without it half of them came cold from memory). Frame: the
// scales times −32 as words at 0(SP), d at 64(SP), the weight rows left
// at 72(SP), the groups' distance in xd8 (64·nb bytes) at 80(SP), the
// distance from a row's super-block to the next block's row's super-block
// 4 places ahead ((rows−1)·rb + 840) at 88(SP). Registers:
// R8 the super-block of weight row 0, SI that of the current weight row,
// CX the super-blocks left, DI, DX and BX the super-block's transposed
// activations, activation scales (xd8) and 16-value sums (bs) of group 0;
// per group R11, R12 and R13 (groups R14 = gs, 80(SP) and 8·AX bytes
// apart; an activation row's 16-value sums AX = bsr bytes after the
// previous one's; xt's super-blocks ss bytes apart), R15 a row's sums, R10
// the group's accumulators and R9 the groups left. Y8-Y15 hold the
// transposed super-block, Y7 the scales as words.
func (a *asm) q6tn() {
	a.l(``)
	a.l(`// func dotQ6KTxNAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bs *int16, bsr int, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)`)
	a.l(`TEXT ·dotQ6KTxNAVX2(SB), NOSPLIT, $96-112`)
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
IMULQ groups+80(FP), R9`)
	a.ktnHead("q6ktn", "bs", 40, 56, 88)
	// the row's super-block 4 ahead, or in the last 4 the next block of
	// rows' (its first super-blocks would come cold from memory)
	a.code(`
MOVQ $840, R15
CMPQ CX, $4
JGT q6ktnpf
MOVQ 88(SP), R15`)
	a.l("q6ktnpf:")
	a.code(`
PREFETCHT0 (SI)(R15*1)
PREFETCHT0 64(SI)(R15*1)
PREFETCHT0 128(SI)(R15*1)
PREFETCHT0 192(SI)(R15*1)`)
	a.q6tnDecode()
	a.code(`
MOVQ DI, R11
MOVQ DX, R12
MOVQ BX, R13
MOVQ groups+80(FP), R9`)
	a.q6Groups("q6ktngroup", 64, func(act func(r, v int) string, bs func(r int) string, half int) {
		a.q6tnHalf(act, bs, half, fmt.Sprintf("%d(R12)", 32*half), fmt.Sprintf("%d(R10)", 32*half))
	})
	a.code(`
ADDQ rb+8(FP), SI
DECQ 72(SP)
JNZ q6ktnrow
ADDQ $210, R8
ADDQ ss+104(FP), DI
ADDQ $64, DX
ADDQ $32, BX
DECQ CX
JNZ q6ktnloop`)
	// each 4 rows' two halves summed as rows8Q6 does, then stored
	a.ktnStore("q6ktn", 64, 72, 80, 88)
}

// q6tnDecode writes the head of a super-block (SI) of dotQ6KTxNAVX2: its
// 8 chunks of 32 values (0-63: ql nibble | qh bits, as q6Decode makes
// them, chunk 4h+c = values 32·(4h+c) to 32·(4h+c)+31) into Y0-Y7, then
// transposed into Y8-Y15 (transposeW8); the scales as words in Y7
// (q6tnperm: even sub-blocks in the low lane), the scales times −32 as
// words in natural order at 0(SP), d as float32 at 64(SP).
func (a *asm) q6tnDecode() {
	a.l("\tVMOVDQU t8mask0f<>(SB), Y14")
	for h := 0; h < 2; h++ {
		ql, qh := 64*h, 128+32*h
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VMOVDQU %d(SI), Y11
VMOVDQU %d(SI), Y13`, ql, ql+32, qh))
		for c := 0; c < 4; c++ {
			a.code(strings.ReplaceAll(q6Decode(c), "Y8", fmt.Sprintf("Y%d", 4*h+c)))
		}
	}
	a.transposeW8()
	a.code(`
VMOVDQU 192(SI), X0
VPSHUFB q6tnperm<>(SB), X0, X1
VPMOVSXBW X1, Y7
VPMOVSXBW X0, Y1
VPSLLW $5, Y1, Y1
VPXOR Y2, Y2, Y2
VPSUBW Y1, Y2, Y1
VMOVDQU Y1, 0(SP)
VPBROADCASTW 208(SI), X0
VCVTPH2PS X0, X0
VMOVSS X0, 64(SP)`)
}

// q6tnHalf writes the products of 4 activation rows (act(r, v): row r's
// 32-byte chunk v; bs(r): its 16-value sums) with the transposed
// super-block in Y8-Y15 and their fold into the float accumulator at acc:
// per row the chunks' products added as words in pairs, each pair's sum
// scaled by one VPMADDWD (Y7), the −32·scale offset from the 16-value sums
// (the scales times −32 at 0(SP)), HADD4, then d (64(SP)) times the rows'
// activation scales at xd, one conversion and one FMA, as dotQ6Kx8AVX2.
// Clobbers Y0-Y6.
func (a *asm) q6tnHalf(act func(r, v int) string, bs func(r int) string, half int, xd, acc string) {
	for r := 0; r < 4; r++ {
		if half == 1 && r == 2 {
			a.l("\tLEAQ (R15)(AX*2), R15")
		}
		a.l("\tVPMADDUBSW %s, Y8, Y%d", act(r, 0), r)
		a.l("\tVPMADDUBSW %s, Y9, Y4", act(r, 1))
		a.l("\tVPADDW Y4, Y%d, Y%d", r, r)
		a.l("\tVPMADDWD Y7, Y%d, Y%d", r, r)
		for p := 1; p < 4; p++ {
			a.l("\tVPMADDUBSW %s, Y%d, Y4", act(r, 2*p), 8+2*p)
			a.l("\tVPMADDUBSW %s, Y%d, Y5", act(r, 2*p+1), 9+2*p)
			a.l("\tVPADDW Y5, Y4, Y4")
			a.l("\tVPMADDWD Y7, Y4, Y4")
			a.l("\tVPADDD Y4, Y%d, Y%d", r, r)
		}
		a.l("\tVMOVDQU %s, Y6", bs(r))
		a.l("\tVPMADDWD 0(SP), Y6, Y6")
		a.l("\tVPADDD Y6, Y%d, Y%d", r, r)
	}
	a.code(fmt.Sprintf(`
HADD4(Y0, Y1, Y2, Y3)
VCVTDQ2PS Y0, Y0
VBROADCASTSS 64(SP), Y4
VMULPS %s, Y4, Y4
VMOVUPS %s, Y6
VFMADD231PS Y0, Y4, Y6
VMOVUPS Y6, %s`, xd, acc, acc))
}

// q6Groups writes the group loop shared by the Q6_K transposed tiles
// (dotQ6KTxNAVX2 and its VNNI twin): per group of 8 activation rows (R11,
// their bsums at R13, AX apart), half 0 takes rows 0-3 and half 1 rows 4-7
// (rows 2 and 3 at 2·AX, 4 and 5 at 4·AX, 6 and 7 at 6·AX, through R15),
// each by body; then the pointers step to the next group and the
// accumulators (R10) by acc bytes.
func (a *asm) q6Groups(label string, acc int, body func(act func(r, v int) string, bs func(r int) string, half int)) {
	a.l("%s:", label)
	for half := 0; half < 2; half++ {
		act := func(r, v int) string { return fmt.Sprintf("%d(R11)", (4*half+r)*256+32*v) }
		bs := func(r int) string {
			switch {
			case half == 0 && r == 0:
				return "(R13)"
			case half == 0 && r == 1:
				return "(R13)(AX*1)"
			case r%2 == 0:
				return "(R15)"
			}
			return "(R15)(AX*1)"
		}
		a.l("\tLEAQ (R13)(AX*%d), R15", 2+2*half)
		body(act, bs, half)
	}
	a.code(`
ADDQ R14, R11
ADDQ 80(SP), R12
LEAQ (R13)(AX*8), R13`)
	a.l("\tADDQ $%d, R10", acc)
	a.l("\tDECQ R9")
	a.l("\tJNZ %s", label)
}
