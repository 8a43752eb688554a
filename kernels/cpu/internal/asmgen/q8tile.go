package asmgen

import "strings"

// q8tileFile writes q8tile_amd64.s: the ×8 tiles on Q8_0 and Q4_0 weights
// that fold a block's 8 rows with unpacks instead of horizontal adds, and
// the Q4_0 tile that multiplies the unsigned nibbles directly.
//
// Each tile computes the same integer block sums as the tiles of
// qtile8.go and folds them with the same float operations in the same
// order, so every result equals dotQ8_0x8AVX2's (dotQ4_0x8AVX2's) bit for
// bit. What changes:
//
//   - The 4 rows' int32 lanes are reduced to [a b c d | a b c d] by
//     UNPK4 (VPUNPCK{L,H}DQ, VPUNPCK{L,H}QDQ and VPADDD: 9 one-µop
//     instructions, the shuffles on the pipes the multiplies leave idle)
//     instead of three VPHADDD (each several µops on Zen 3).
//   - Q4_0: the nibbles q (0–15) go into VPMADDUBSW as the unsigned
//     operand against each row's int8 block straight from memory, and the
//     block's −8·Σx comes from the transposed activation sums actQ.s8
//     (one VPSUBD per 4 rows), so each row costs VPMADDUBSW and VPMADDWD
//     instead of a load, VPSIGNB, VPMADDUBSW and VPMADDWD.
func q8tileFile() string {
	var a asm
	a.header()
	a.lines(`
// ×8 tiles on Q8_0 and Q4_0 weights folded with unpacks (see q8tile.go in
// package asmgen and kernels/cpu/q8tile.go). Activation rows are xs bytes
// apart; xd8 holds, per block, the 8 rows' scales as [r0-r3 r0-r3 r4-r7
// r4-r7]; s8 (Q4_0) holds, per block, 8·Σx of rows 0-7 as int32.`)
	a.l(``)
	a.l("%s", macrosQ8Tile)
	a.q8tile(false, false)
	a.q8tile(true, false)
	a.q8x2x4(false)
	return a.b.String()
}

// macrosQ8Tile holds the nibble mask and the unpack fold.
const macrosQ8Tile = `DATA q8tmask0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q8tmask0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q8tmask0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q8tmask0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q8tmask0f<>(SB), RODATA|NOPTR, $32

// UNPK4 adds the 8 int32 lanes of each of Ya, Yb, Yc, Yd (rows 0-3)
// within each 128-bit half into Ya = [a b c d | a b c d], as HADD4 of
// qtile8_amd64.s does (the same integer sums). Clobbers Yb and Yt.
#define UNPK4(Ya, Yb, Yc, Yd, Yt) \
	VPUNPCKHDQ Yb, Ya, Yt; \
	VPUNPCKLDQ Yb, Ya, Ya; \
	VPADDD Yt, Ya, Ya; \
	VPUNPCKHDQ Yd, Yc, Yb; \
	VPUNPCKLDQ Yd, Yc, Yc; \
	VPADDD Yb, Yc, Yc; \
	VPUNPCKHQDQ Yc, Ya, Yb; \
	VPUNPCKLQDQ Yc, Ya, Ya; \
	VPADDD Yb, Ya, Ya`

// q8tile writes dotQ8_0x8UAVX2 (or, q4, dotQ4_0x8UAVX2). Q8_0: per
// 34-byte block the signed weights (Y9) and |w| (Y10) meet each row's block
// (VPSIGNB on the activations, VPMADDUBSW, VPMADDWD with ones), the rows'
// lanes are folded by UNPK4 and the block by one conversion and one FMA
// per 4 rows with d_w·[d_x of the rows], the two 128-bit halves in their
// own lanes (summed at the end), as dotQ8_0x8AVX2. Q4_0: per 18-byte block
// the nibbles (Y9, low nibbles in the low lane) meet each row's block from
// memory, the halves are added, 8·Σx subtracted, and each row's whole
// block sum goes into one FMA chain, as dotQ4_0x8AVX2 and dotQ4_0Go.
//
// With vnni it writes the AVX512_VNNI twin (dotQ8_0x8VNNI, dotQ4_0x8VNNI;
// q8vnni.go): each row's VPMADDUBSW + VPMADDWD becomes a zero idiom and one
// VPDPBUSD, which gives the same int32 lanes.
func (a *asm) q8tile(q4, vnni bool) {
	name, lbl, bb := "dotQ8_0x8UAVX2", "q80x8uloop", 34
	if q4 {
		name, lbl, bb = "dotQ4_0x8UAVX2", "q40x8uloop", 18
	}
	if vnni {
		name, lbl = strings.Replace(name, "UAVX2", "VNNI", 1), strings.Replace(lbl, "uloop", "vloop", 1)
	}
	a.l(``)
	if q4 {
		a.l(`// func %s(w *byte, xq *int8, xs int, xd8 *float32, s8 *int32, nb int, out *[8]float32)`, name)
		a.l(`TEXT ·%s(SB), NOSPLIT, $0-56`, name)
	} else {
		a.l(`// func %s(w *byte, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32)`, name)
		a.l(`TEXT ·%s(SB), NOSPLIT, $0-48`, name)
	}
	a.prolog8()
	if q4 {
		a.code(`
MOVQ s8+32(FP), BX
MOVQ nb+40(FP), CX
VMOVDQU q8tmask0f<>(SB), Y14`)
	} else {
		a.code("MOVQ nb+32(FP), CX")
	}
	if !vnni {
		a.code(`
VPCMPEQW Y15, Y15, Y15
VPSRLW $15, Y15, Y15`)
	}
	a.code(`
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1`)
	a.l("%s:", lbl)
	a.code(`
VPBROADCASTW (SI), X8
VCVTPH2PS X8, Y8`)
	t := []int{2, 3, 4, 5, 6, 7, 11, 12}
	if q4 {
		a.code(`
VMOVDQU 2(SI), X9
VPSRLW $4, X9, X10
VINSERTI128 $1, X10, Y9, Y9
VPAND Y14, Y9, Y9`)
		for r := 0; r < 8; r++ {
			if vnni {
				a.l("\tVPXOR Y%d, Y%d, Y%d", t[r], t[r], t[r])
				a.l("\tVPDPBUSD %s, Y9, Y%d", rows8[r], t[r])
				continue
			}
			a.l("\tVPMADDUBSW %s, Y9, Y%d", rows8[r], t[r])
			a.l("\tVPMADDWD Y15, Y%d, Y%d", t[r], t[r])
		}
	} else {
		a.code("VMOVDQU 2(SI), Y9\nVPABSB Y9, Y10")
		tmp := []int{13, 15} // VNNI: the signed rows beside the accumulators
		for r := 0; r < 8; r++ {
			if vnni {
				x := tmp[r%2]
				a.l("\tVMOVDQU %s, Y%d", rows8[r], x)
				a.l("\tVPSIGNB Y9, Y%d, Y%d", x, x)
				a.l("\tVPXOR Y%d, Y%d, Y%d", t[r], t[r], t[r])
				a.l("\tVPDPBUSD Y%d, Y10, Y%d", x, t[r])
				continue
			}
			a.l("\tVMOVDQU %s, Y%d", rows8[r], t[r])
			a.l("\tVPSIGNB Y9, Y%d, Y%d", t[r], t[r])
			a.l("\tVPMADDUBSW Y%d, Y10, Y%d", t[r], t[r])
			a.l("\tVPMADDWD Y15, Y%d, Y%d", t[r], t[r])
		}
	}
	a.code(`
UNPK4(Y2, Y3, Y4, Y5, Y9)
UNPK4(Y6, Y7, Y11, Y12, Y10)`)
	if q4 {
		// the block's whole integer sum Σq·x − 8·Σx, then one fused
		// multiply-add per row (ggml's order, dotQ4_0Go)
		a.code(`
VEXTRACTI128 $1, Y2, X13
VPADDD X13, X2, X2
VEXTRACTI128 $1, Y6, X13
VPADDD X13, X6, X6
VPSUBD (BX), X2, X2
VPSUBD 16(BX), X6, X6
VCVTDQ2PS X2, X2
VCVTDQ2PS X6, X6
VMULPS (DX), X8, X13
VMULPS 32(DX), X8, X3
VFMADD231PS X2, X13, X0
VFMADD231PS X6, X3, X1
ADDQ $32, BX`)
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
MOVQ out+` + map[bool]string{false: "40", true: "48"}[q4] + `(FP), AX
VEXTRACTF128 $1, Y0, X10
VADDPS X10, X0, X0
VMOVUPS X0, (AX)
VEXTRACTF128 $1, Y1, X10
VADDPS X10, X1, X1
VMOVUPS X1, 16(AX)
VZEROUPPER
RET`)
}

// q8x2x4 writes dotQ8_0x2x4AVX2: two Q8_0 weight rows (ws bytes apart)
// against 4 activation rows, each activation load shared by both weight
// rows. Per block each row is signed by both weights (Y2-Y5 the products
// with weight row 0, Y6-Y9 with row 1, the loaded row becoming the second),
// the lanes are folded by UNPK4 and each weight row's block by one
// conversion and one FMA with d_w·[d_x of the rows] from xd8 (whose 8
// floats per block, 64 bytes apart, are the half of a group's scales the 4
// rows take): dotQ8_0x8UAVX2's operations for those rows, so the results
// equal it bit for bit. With vnni it writes the AVX512_VNNI twin
// dotQ8_0x2x4VNNI (q8vnni.go): a zero idiom and one VPDPBUSD per
// VPMADDUBSW + VPMADDWD, the same int32 lanes.
func (a *asm) q8x2x4(vnni bool) {
	name, lbl := "dotQ8_0x2x4AVX2", "q80x2x4loop"
	if vnni {
		name, lbl = "dotQ8_0x2x4VNNI", "q80x2x4vloop"
	}
	a.l(``)
	a.l(`// func %s(w *byte, ws int, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-56`, name)
	a.code(`
MOVQ w+0(FP), SI
MOVQ ws+8(FP), R8
MOVQ xq+16(FP), DI
MOVQ xs+24(FP), R12
LEAQ (R12)(R12*2), R13
MOVQ xd8+32(FP), DX
MOVQ nb+40(FP), CX`)
	if !vnni {
		a.code(`
VPCMPEQW Y15, Y15, Y15
VPSRLW $15, Y15, Y15`)
	}
	a.code(`
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1`)
	a.l("%s:", lbl)
	a.code(`
VMOVDQU 2(SI), Y10
VPABSB Y10, Y11
VMOVDQU 2(SI)(R8*1), Y12
VPABSB Y12, Y13`)
	for r := 0; r < 4; r++ {
		if vnni {
			a.l("	VMOVDQU %s, Y14", rows8[r])
			a.l("	VPSIGNB Y10, Y14, Y15")
			a.l("	VPXOR Y%d, Y%d, Y%d", 2+r, 2+r, 2+r)
			a.l("	VPDPBUSD Y15, Y11, Y%d", 2+r)
			a.l("	VPSIGNB Y12, Y14, Y14")
			a.l("	VPXOR Y%d, Y%d, Y%d", 6+r, 6+r, 6+r)
			a.l("	VPDPBUSD Y14, Y13, Y%d", 6+r)
			continue
		}
		a.l("	VMOVDQU %s, Y%d", rows8[r], 6+r)
		a.l("	VPSIGNB Y10, Y%d, Y%d", 6+r, 2+r)
		a.l("	VPSIGNB Y12, Y%d, Y%d", 6+r, 6+r)
		a.l("	VPMADDUBSW Y%d, Y11, Y%d", 2+r, 2+r)
		a.l("	VPMADDWD Y15, Y%d, Y%d", 2+r, 2+r)
		a.l("	VPMADDUBSW Y%d, Y13, Y%d", 6+r, 6+r)
		a.l("	VPMADDWD Y15, Y%d, Y%d", 6+r, 6+r)
	}
	a.code(`
UNPK4(Y2, Y3, Y4, Y5, Y14)
UNPK4(Y6, Y7, Y8, Y9, Y14)
VCVTDQ2PS Y2, Y2
VCVTDQ2PS Y6, Y6
VPBROADCASTW (SI), X10
VCVTPH2PS X10, Y10
VPBROADCASTW (SI)(R8*1), X12
VCVTPH2PS X12, Y12
VMULPS (DX), Y10, Y10
VMULPS (DX), Y12, Y12
VFMADD231PS Y2, Y10, Y0
VFMADD231PS Y6, Y12, Y1
ADDQ $34, SI
ADDQ $32, DI
ADDQ $64, DX
DECQ CX`)
	a.l("\tJNZ %s", lbl)
	a.code(`
MOVQ out+48(FP), AX
VEXTRACTF128 $1, Y0, X10
VADDPS X10, X0, X0
VMOVUPS X0, (AX)
VEXTRACTF128 $1, Y1, X10
VADDPS X10, X1, X1
VMOVUPS X1, 16(AX)
VZEROUPPER
RET`)
}
