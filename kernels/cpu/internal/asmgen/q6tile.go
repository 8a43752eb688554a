package asmgen

import "fmt"

// q6UnpackBytes is the size of one Q6_K super-block unpacked by
// q6kUnpackAVX2 (kernels/cpu/q6tile.go keeps the same constant).
const q6UnpackBytes = 320

// q6tileFile writes q6tile_amd64.s: the Q6_K ×8 tile on weight rows
// unpacked once per block of weight rows (see kernels/cpu/q6tile.go).
func q6tileFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q6_K ×8 tile on unpacked weight rows (see q6tile.go): the same
// integer and float operations as dotQ6Kx8AVX2 of qtile8_amd64.s, except
// that each super-block's 6-bit values, scales, scales times −32 and d are
// read as q6kUnpackAVX2 left them, once per block of weight rows and span
// of the reduction, not decoded per call; the float accumulators stay in
// registers within a span and are carried between spans in memory.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.q6Unpack()
	a.q6x8r()
	return a.b.String()
}

// q6Unpack writes q6kUnpackAVX2: rows Q6_K weight rows (rb bytes apart, nb
// super-blocks each) unpacked into u, q6UnpackBytes per super-block and
// row: the 256 values (0-63, ql nibble | qh bits) in the ×8 tile's chunk
// order (32 per chunk: half h, chunk c at 32·(4h+c)), the 16 scales as
// words at 256, the scales times −32 as words at 288; d as float32 into
// ud, one per super-block and row. It prefetches the 210 bytes pf bytes
// after each super-block it reads (the next span of the row, whose
// unpacking comes after all the groups have met this span: a stream of
// short runs that the hardware prefetchers do not follow).
func (a *asm) q6Unpack() {
	a.l(``)
	a.l(`// func q6kUnpackAVX2(w *byte, rb int, rows int, nb int, u *byte, ud *float32, pf int)`)
	a.l(`TEXT ·q6kUnpackAVX2(SB), NOSPLIT, $0-56`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ rb+8(FP), R9
MOVQ rows+16(FP), BX
MOVQ nb+24(FP), R10
MOVQ u+32(FP), DI
MOVQ ud+40(FP), R8
MOVQ pf+48(FP), R11
` + broadcast(0x0f0f0f0f, 14) + `
VPXOR Y15, Y15, Y15
q6kunrow:
MOVQ SI, DX
MOVQ R10, CX
q6kunblk:
PREFETCHT0 (DX)(R11*1)
PREFETCHT0 64(DX)(R11*1)
PREFETCHT0 128(DX)(R11*1)
PREFETCHT0 192(DX)(R11*1)
VPMOVSXBW 192(DX), Y12
VMOVDQU Y12, 256(DI)
VPSLLW $5, Y12, Y12
VPSUBW Y12, Y15, Y12
VMOVDQU Y12, 288(DI)`)
	for h := 0; h < 2; h++ {
		ql, qh := 64*h, 128+32*h
		a.code(fmt.Sprintf(`
VMOVDQU %d(DX), Y10
VMOVDQU %d(DX), Y11
VMOVDQU %d(DX), Y13`, ql, ql+32, qh))
		for c := 0; c < 4; c++ {
			a.code(q6Decode(c))
			a.l("\tVMOVDQU Y8, %d(DI)", 32*(4*h+c))
		}
	}
	a.code(`
VPBROADCASTW 208(DX), X0
VCVTPH2PS X0, X0
VMOVSS X0, (R8)
ADDQ $210, DX
ADDQ $320, DI
ADDQ $4, R8
DECQ CX
JNZ q6kunblk
ADDQ R9, SI
DECQ BX
JNZ q6kunrow
VZEROUPPER
RET`)
}

// q6Decode decodes chunk c (0-3) of a Q6_K half into Y8 as q6Kx8 does:
// from ql (Y10, Y11) and qh (Y13), with 0x0f bytes in Y14; clobbers Y9.
func q6Decode(c int) string {
	s := ""
	switch c {
	case 0:
		s = "VPAND Y14, Y10, Y8\nVPSLLW $4, Y13, Y9\n"
	case 1:
		s = "VPAND Y14, Y11, Y8\nVPSLLW $2, Y13, Y9\n"
	case 2:
		s = "VPSRLW $4, Y10, Y8\nVPAND Y14, Y8, Y8\nVPAND t8mask30<>(SB), Y13, Y9\n"
	case 3:
		s = "VPSRLW $4, Y11, Y8\nVPAND Y14, Y8, Y8\nVPSRLW $2, Y13, Y9\n"
	}
	if c != 2 {
		s += "VPAND t8mask30<>(SB), Y9, Y9\n"
	}
	return s + "VPOR Y9, Y8, Y8"
}

// q6x8r writes dotQ6Kx8RAVX2: rows unpacked weight rows (u, ud
// contiguous: nb super-blocks each) against one group of 8 activation
// rows, each row's float accumulators (16 floats: rows 0-3 twice, then
// rows 4-7 twice, as Y8 and Y9 hold them) loaded from st and stored back,
// 64 bytes per weight row, so that a reduction can be cut into spans. Per
// super-block each row's int32 lanes start at −32·Σ_i sc_i·(Σx)_i (the
// scales times −32 at 288(u) against the rows' 16-value sums at BX /
// R10), each of the 8 chunks of 32 values is loaded once and meets every
// row with its pair of 16-value scales (words at 256(u)), and the
// super-block is folded with d (ud) times the rows' activation scales into
// Y8 (rows 0-3) and Y9 (rows 4-7): q6Kx8's operations in its order.
// (Measured and dropped: the rows' horizontal adds by unpacks instead of
// VPHADDD, no faster; docs/bench/q6k-tiles.md.)
func (a *asm) q6x8r() {
	a.l(``)
	a.l(`// func dotQ6Kx8RAVX2(u *byte, ud *float32, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, rows int, st *float32)`)
	a.l(`TEXT ·dotQ6Kx8RAVX2(SB), NOSPLIT, $8-80`)
	a.code(`
MOVQ u+0(FP), SI
MOVQ ud+8(FP), R8
MOVQ st+72(FP), AX
MOVQ rows+64(FP), CX
MOVQ CX, 0(SP)
q6kx8rrow:
MOVQ xq+16(FP), DI
MOVQ xs+24(FP), R12
LEAQ (R12)(R12*2), R13
LEAQ (DI)(R12*4), R11
MOVQ xd8+32(FP), DX
MOVQ bs+40(FP), BX
MOVQ bss+48(FP), R15
SHLQ $1, R15
LEAQ (R15)(R15*2), R9
LEAQ (BX)(R15*4), R10
MOVQ nb+56(FP), CX
VMOVUPS (AX), Y8
VMOVUPS 32(AX), Y9
q6kx8rloop:
VMOVDQU 288(SI), Y13`)
	bsRow := []string{"(BX)", "(BX)(R15*1)", "(BX)(R15*2)", "(BX)(R9*1)", "(R10)", "(R10)(R15*1)", "(R10)(R15*2)", "(R10)(R9*1)"}
	for r := 0; r < 8; r++ {
		a.l("\tVPMADDWD %s, Y13, Y%d", bsRow[r], r)
	}
	for k := 0; k < 8; k++ {
		h, c := k/4, k%4
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VPBROADCASTD %d(SI), Y12
VPSHUFB t8shuf<>(SB), Y12, Y12`, 32*k, 256+16*h+4*c))
		for r := 0; r < 8; r++ {
			a.l("\tVPMADDUBSW %s, Y10, Y15", rowAt(r, 128*h+32*c))
			a.l("\tVPMADDWD Y12, Y15, Y15")
			a.l("\tVPADDD Y15, Y%d, Y%d", r, r)
		}
	}
	a.code(`
HADD4(Y0, Y1, Y2, Y3)
HADD4(Y4, Y5, Y6, Y7)
VCVTDQ2PS Y0, Y0
VCVTDQ2PS Y4, Y4
VBROADCASTSS (R8), Y10
VMULPS (DX), Y10, Y12
VFMADD231PS Y0, Y12, Y8
VMULPS 32(DX), Y10, Y12
VFMADD231PS Y4, Y12, Y9
ADDQ $320, SI
ADDQ $4, R8
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $32, BX
ADDQ $32, R10
DECQ CX
JNZ q6kx8rloop
VMOVUPS Y8, (AX)
VMOVUPS Y9, 32(AX)
ADDQ $64, AX
DECQ 0(SP)
JNZ q6kx8rrow
VZEROUPPER
RET`)
}
