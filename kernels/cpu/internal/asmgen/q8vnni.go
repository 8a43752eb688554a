package asmgen

// q8vnniFile writes q8vnni_amd64.s: the AVX512_VNNI twins of the Q8_0 and
// Q4_0 batch tiles of q8tile.go (dotQ8_0x8UAVX2, dotQ4_0x8UAVX2,
// dotQ8_0x2x4AVX2).
//
// VPDPBUSD (256-bit, EVEX) multiplies unsigned bytes by signed bytes and
// adds each group of 4 products into an int32 lane without any int16
// intermediate, so it replaces VPMADDUBSW + VPMADDWD(ones) with one
// instruction and yields the same int32 lanes. The AVX2 tiles never
// saturate (Q8_0: |w| ≤ 128 against a signed byte, a pair at most
// 2·128·128 = 32768 in magnitude and −32768 only at the negative end, which
// int16 holds; Q4_0: nibbles ≤ 15), so every lane, and after the same
// UNPK4 fold and the same float operations in the same order every
// result, equals the AVX2 tile's bit for bit.
//
//   - Q8_0: the weight's sign moves onto the activations (VPSIGNB) and
//     |w| is the unsigned operand, as in the AVX2 tiles.
//   - Q4_0: the nibbles (0–15) are the unsigned operand against each
//     row's int8 block straight from memory: one instruction per row and
//     block (after a zero idiom) instead of two.
func q8vnniFile() string {
	var a asm
	a.header()
	a.lines(`
// AVX512_VNNI twins of the ×8 and 2×4 tiles of q8tile_amd64.s (see
// q8vnni.go in package asmgen and kernels/cpu/q8vnni.go): the same int32
// lanes from VPDPBUSD, the same folds, results equal bit for bit.`)
	a.l(``)
	a.l("%s", macrosQ8Tile)
	a.q8tile(false, true)
	a.q8tile(true, true)
	a.q8x2x4(true)
	a.q8tvnni()
	a.q8t2vnni()
	a.q4tvnni()
	return a.b.String()
}

// q8tvnni writes dotQ8_0x8TVNNI: one Q8_0 weight row against 8 activation
// rows stored transposed by 4-byte groups and offset to unsigned
// (actQ.qt: per block, for each of its 8 groups of 4 values, the 8 rows'
// 4 bytes x+128), so that one VPDPBUSD with the weight group broadcast
// from memory (the signed operand) adds 4 products into each of the 8
// rows' lanes: a half block is 4 instructions for 8 rows and needs no
// fold. Σ(x+128)·w = Σx·w + 128·Σw, so each half's accumulator starts at
// −128·Σw over the half (VPDPBUSD of ones against the weights, two
// in-lane shuffles and adds, broadcast by VPERMQ). The half sums are
// those of dotQ8_0x8UAVX2 (exact in both), folded by the same
// conversion and fused multiply-add per row and half with d_w·d_x, and
// the two halves are added at the end, so the results equal it bit for
// bit.
func (a *asm) q8tvnni() {
	a.l(``)
	a.l(`// func dotQ8_0x8TVNNI(w *byte, xt *uint8, xd8 *float32, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ8_0x8TVNNI(SB), NOSPLIT, $0-40`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ xt+8(FP), DI
MOVQ xd8+16(FP), DX
MOVQ nb+24(FP), CX
VPCMPEQB Y15, Y15, Y15
VPABSB Y15, Y15
VPXOR Y14, Y14, Y14
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1`)
	a.l("q80x8tloop:")
	a.code(`
VMOVDQU 2(SI), Y9
VPXOR Y10, Y10, Y10
VPDPBUSD Y9, Y15, Y10
VPSHUFD $0x4e, Y10, Y11
VPADDD Y11, Y10, Y10
VPSHUFD $0xb1, Y10, Y11
VPADDD Y11, Y10, Y10
VPSLLD $7, Y10, Y10
VPSUBD Y10, Y14, Y10
VPERMQ $0x00, Y10, Y2
VPERMQ $0xaa, Y10, Y3`)
	for j := 0; j < 8; j++ {
		acc := 2 + j/4
		x := 4 + j%4
		a.l("\tVMOVDQU %d(DI), Y%d", 32*j, x)
		a.l("\tVPDPBUSD.BCST %d(SI), Y%d, Y%d", 2+4*j, x, acc)
	}
	a.code(`
VPBROADCASTW (SI), X8
VCVTPH2PS X8, Y8
VCVTDQ2PS Y2, Y2
VCVTDQ2PS Y3, Y3
VMOVUPS (DX), X12
VINSERTF128 $1, 32(DX), Y12, Y12
VMULPS Y12, Y8, Y12
VFMADD231PS Y2, Y12, Y0
VFMADD231PS Y3, Y12, Y1
ADDQ $34, SI
ADDQ $256, DI
ADDQ $64, DX
DECQ CX
JNZ q80x8tloop
MOVQ out+32(FP), AX
VADDPS Y1, Y0, Y0
VMOVUPS Y0, (AX)
VZEROUPPER
RET`)
}

// q8t2vnni writes dotQ8_0x2x8TVNNI: dotQ8_0x8TVNNI on two weight rows ws
// bytes apart, each transposed activation load shared by both (the same
// operations per weight row, so the same results bit for bit). out gets
// the first row's 8 results, then the second's.
func (a *asm) q8t2vnni() {
	a.l(``)
	a.l(`// func dotQ8_0x2x8TVNNI(w *byte, ws int, xt *uint8, xd8 *float32, nb int, out *[16]float32)`)
	a.l(`TEXT ·dotQ8_0x2x8TVNNI(SB), NOSPLIT, $0-48`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ ws+8(FP), R8
MOVQ xt+16(FP), DI
MOVQ xd8+24(FP), DX
MOVQ nb+32(FP), CX
VPCMPEQB Y15, Y15, Y15
VPABSB Y15, Y15
VPXOR Y14, Y14, Y14
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1
VXORPS Y16, Y16, Y16
VXORPS Y17, Y17, Y17`)
	a.l("q80x2x8tloop:")
	for i, w := range []string{"(SI)", "(SI)(R8*1)"} {
		a.l("\tVMOVDQU 2%s, Y9", w)
		a.code(`
VPXOR Y10, Y10, Y10
VPDPBUSD Y9, Y15, Y10
VPSHUFD $0x4e, Y10, Y11
VPADDD Y11, Y10, Y10
VPSHUFD $0xb1, Y10, Y11
VPADDD Y11, Y10, Y10
VPSLLD $7, Y10, Y10
VPSUBD Y10, Y14, Y10`)
		a.l("\tVPERMQ $0x00, Y10, Y%d", 2+2*i)
		a.l("\tVPERMQ $0xaa, Y10, Y%d", 3+2*i)
	}
	for j := 0; j < 8; j++ {
		x := 6 + j%2
		a.l("\tVMOVDQU %d(DI), Y%d", 32*j, x)
		a.l("\tVPDPBUSD.BCST %d(SI), Y%d, Y%d", 2+4*j, x, 2+j/4)
		a.l("\tVPDPBUSD.BCST %d(SI)(R8*1), Y%d, Y%d", 2+4*j, x, 4+j/4)
	}
	a.code(`
VMOVUPS (DX), X12
VINSERTF128 $1, 32(DX), Y12, Y12
VPBROADCASTW (SI), X8
VCVTPH2PS X8, Y8
VPBROADCASTW (SI)(R8*1), X13
VCVTPH2PS X13, Y13
VMULPS Y12, Y8, Y8
VMULPS Y12, Y13, Y13
VCVTDQ2PS Y2, Y2
VCVTDQ2PS Y3, Y3
VCVTDQ2PS Y4, Y4
VCVTDQ2PS Y5, Y5
VFMADD231PS Y2, Y8, Y0
VFMADD231PS Y3, Y8, Y1
VFMADD231PS Y4, Y13, Y16
VFMADD231PS Y5, Y13, Y17
ADDQ $34, SI
ADDQ $256, DI
ADDQ $64, DX
DECQ CX
JNZ q80x2x8tloop
MOVQ out+40(FP), AX
VADDPS Y1, Y0, Y0
VMOVUPS Y0, (AX)
VADDPS Y17, Y16, Y16
VMOVUPS Y16, 32(AX)
VZEROUPPER
RET`)
}

// q4tvnni writes dotQ4_0x8TVNNI: one Q4_0 weight row against 8 activation
// rows in dotQ8_0x8TVNNI's transposed layout (actQ.qt, x+128). Per 18-byte
// block the nibbles q (0–15) are unpacked in value order (low nibbles,
// then high, as dotQ4_0x8UAVX2 does) and stored to the frame, from which
// each group of 4 is broadcast as VPDPBUSD's signed operand: 8
// instructions add the block's 32 products into each of the 8 rows' lanes.
// Σ(x+128)·q = Σx·q + 128·Σq, so the accumulator starts at
// −(128·Σq + 8·Σx) (Σq by VPSADBW and adds across the lanes, 8·Σx of each
// row from actQ.s8): it ends at Σ(q−8)·x, dotQ4_0x8UAVX2's exact block
// sum, no int16 step in either. The fold is dotQ4_0x8UAVX2's per row:
// one conversion and one fused multiply-add with d_w·d_x into a chain per
// row, and +0 added at the end (its upper half), so the results equal it
// bit for bit.
func (a *asm) q4tvnni() {
	a.l(``)
	a.l(`// func dotQ4_0x8TVNNI(w *byte, xt *uint8, xd8 *float32, s8 *int32, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ4_0x8TVNNI(SB), NOSPLIT, $32-48`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ xt+8(FP), DI
MOVQ xd8+16(FP), DX
MOVQ s8+24(FP), BX
MOVQ nb+32(FP), CX
VMOVDQU q8tmask0f<>(SB), Y13
VPXOR Y14, Y14, Y14
VXORPS Y0, Y0, Y0`)
	a.l("q40x8tloop:")
	a.code(`
VMOVDQU 2(SI), X9
VPSRLW $4, X9, X10
VINSERTI128 $1, X10, Y9, Y9
VPAND Y13, Y9, Y9
VMOVDQU Y9, (SP)
VPSADBW Y14, Y9, Y10
VPSHUFD $0x4e, Y10, Y11
VPADDD Y11, Y10, Y10
VPERMQ $0x4e, Y10, Y11
VPADDD Y11, Y10, Y10
VPSHUFD $0x00, Y10, Y10
VPSLLD $7, Y10, Y10
VPADDD (BX), Y10, Y10
VPSUBD Y10, Y14, Y2`)
	for j := 0; j < 8; j++ {
		x := 4 + j%4
		a.l("	VMOVDQU %d(DI), Y%d", 32*j, x)
		a.l("	VPDPBUSD.BCST %d(SP), Y%d, Y2", 4*j, x)
	}
	a.code(`
VPBROADCASTW (SI), X8
VCVTPH2PS X8, Y8
VCVTDQ2PS Y2, Y2
VMOVUPS (DX), X12
VINSERTF128 $1, 32(DX), Y12, Y12
VMULPS Y12, Y8, Y12
VFMADD231PS Y2, Y12, Y0
ADDQ $18, SI
ADDQ $256, DI
ADDQ $64, DX
ADDQ $32, BX
DECQ CX
JNZ q40x8tloop
MOVQ out+40(FP), AX
VXORPS Y1, Y1, Y1
VADDPS Y1, Y0, Y0
VMOVUPS Y0, (AX)
VZEROUPPER
RET`)
}
