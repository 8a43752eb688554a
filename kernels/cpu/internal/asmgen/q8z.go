package asmgen

import "strings"

// q8zFile writes q8z_amd64.s: the Q8_0 tile on AVX-512 VNNI with 4 weight
// rows against 16 activation rows held in Z registers (dotQ8_0x4x16TVNNI),
// and its weight-side preparation (q8zPrep).
//
// dotQ8_0x8TVNNI (q8vnni.go) reads its 8 transposed activation rows (32
// bytes per group of 4 values) from L1 or L2 once per weight row and block,
// and spends 11 of its ≈ 38 instructions per block on the weight's
// −128·Σw offset and 9 on the float fold: ≈ 6.7 multiply-adds per
// instruction. Here each 64-byte activation load (16 rows' 4 bytes) feeds
// 4 weight rows' VPDPBUSD (Z, the weight group broadcast from memory), and
// the offsets and the float scales d_w of the 4 rows come ready from
// q8zPrep, made once per block of weight rows for all the groups of 16
// rows: per weight row, block and 16 rows, 8 VPDPBUSD, 2 broadcast loads
// (the accumulators' starting offsets), a multiply (d_w·d_x), 2
// conversions and 2 fused multiply-adds: ≈ 40 multiply-adds per
// instruction.
//
// The sums are those of dotQ8_0x8TVNNI and dotQ8_0x8UAVX2 (exact int32 half
// sums Σx·w over values 0–15 and 16–31 of a block), and each row's fold is
// theirs: d = d_w·d_x, then per half acc_h = fma(d, float(sum_h), acc_h)
// over the blocks, and acc_0 + acc_1 at the end: the results equal theirs
// bit for bit.
func q8zFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q8_0 and Q4_0 tiles of 4 weight rows × 16 activation rows on
// AVX-512 VNNI and their weight-side preparation (see q8z.go in package
// asmgen and kernels/cpu/q8z.go); results equal dotQ8_0x8TVNNI's and
// dotQ4_0x8TVNNI's bit for bit.`)
	a.l(``)
	for i := 0; i < 4; i++ {
		a.l("DATA q4zmask0f<>+%d(SB)/8, $0x0f0f0f0f0f0f0f0f", 8*i)
	}
	a.l("GLOBL q4zmask0f<>(SB), RODATA|NOPTR, $32")
	a.l("DATA q16sign<>+0(SB)/4, $0x80808080")
	a.l("GLOBL q16sign<>(SB), RODATA|NOPTR, $4")
	a.l(``)
	a.q16Transpose()
	a.q8zPrep()
	a.q8zTile()
	a.q4zPrep()
	a.q4zTile()
	return a.b.String()
}

// q16Transpose writes transposeQ16Z(src *int8, k int, nc int, dst *uint8):
// 16 int8 rows of k bytes (k ≥ 64·nc) at src, their first nc·64 bytes
// transposed by 4-byte words to dst (actQ.qz's layout for one group of 16
// rows): word w of row i, plus 128 in each byte, goes to dst + 64·w + 4·i.
// Per chunk of 64 bytes (16 words) of every row: 16 loads, a 16 × 16
// transposition of dwords (VPUNPCKLDQ/HDQ, VPUNPCKLQDQ/HQDQ within the
// 128-bit lanes, then VSHUFI32X4 across them: 64 shuffles), 16 XORs with
// 0x80 per byte, 16 stores of 64 bytes; the Go loop it replaces moves one
// word at a time.
func (a *asm) q16Transpose() {
	a.l(`// func transposeQ16Z(src *int8, k int, nc int, dst *uint8)`)
	a.l(`TEXT ·transposeQ16Z(SB), NOSPLIT, $0-32`)
	a.code(`
MOVQ src+0(FP), SI
MOVQ k+8(FP), R8
MOVQ nc+16(FP), CX
MOVQ dst+24(FP), DI
LEAQ (R8)(R8*2), R9
LEAQ (R8)(R8*4), R10
LEAQ (R9)(R8*4), R11
LEAQ (SI)(R8*8), BX`)
	a.l("q16tloop:")
	row := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)", "(SI)(R8*4)", "(SI)(R10*1)", "(SI)(R9*2)", "(SI)(R11*1)"}
	for r := 0; r < 16; r++ {
		base := row[r%8]
		if r >= 8 {
			base = strings.Replace(base, "(SI)", "(BX)", 1)
		}
		a.l("\tVMOVDQU32 %s, Z%d", base, r)
	}
	// stage 1: rows 2i, 2i+1 interleaved by dwords, per 128-bit lane
	for i := 0; i < 8; i++ {
		a.l("\tVPUNPCKLDQ Z%d, Z%d, Z%d", 2*i+1, 2*i, 16+2*i)
		a.l("\tVPUNPCKHDQ Z%d, Z%d, Z%d", 2*i+1, 2*i, 17+2*i)
	}
	// stage 2: per group q of 4 rows, Z(4q+j) lane L = rows 4q..4q+3's word 4L+j
	for q := 0; q < 4; q++ {
		t := 16 + 4*q
		a.l("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t+2, t, 4*q)
		a.l("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t+2, t, 4*q+1)
		a.l("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t+3, t+1, 4*q+2)
		a.l("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t+3, t+1, 4*q+3)
	}
	// stages 3–4: word 4L+j = lane L of Z(j), Z(4+j), Z(8+j), Z(12+j)
	for j := 0; j < 4; j++ {
		a.l("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z16", 4+j, j)
		a.l("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z17", 4+j, j)
		a.l("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z18", 12+j, 8+j)
		a.l("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z19", 12+j, 8+j)
		a.l("\tVSHUFI32X4 $0x88, Z18, Z16, Z20")
		a.l("\tVSHUFI32X4 $0xdd, Z18, Z16, Z21")
		a.l("\tVSHUFI32X4 $0x88, Z19, Z17, Z22")
		a.l("\tVSHUFI32X4 $0xdd, Z19, Z17, Z23")
		for L := 0; L < 4; L++ {
			a.l("\tVPXORD.BCST q16sign<>(SB), Z%d, Z%d", 20+L, 20+L)
			a.l("\tVMOVDQU32 Z%d, %d(DI)", 20+L, 64*(4*L+j))
		}
	}
	a.code(`
ADDQ $64, SI
ADDQ $64, BX
ADDQ $1024, DI
DECQ CX
JNZ q16tloop
VZEROUPPER
RET`)
}

// q8zPrep writes q8zPrep(w *byte, ws int, nb int, corr *int32): for each of
// 4 weight rows ws bytes apart (nb ≥ 1 blocks) and each group of 4 blocks,
// 48 bytes at corr + row·g·48 + (b/4)·48 (g = ⌈nb/4⌉ groups per row): the 4
// blocks' −128·Σw over values 0–15, then over 16–31 (int32), then their
// scales d_w as float32. Σ by VPDPBUSD of ones against the weights and two
// horizontal adds across 4 blocks. A last group of 1–3 blocks (nb%4) is
// laid out as a whole one, its missing blocks' slots 0; no byte past a
// row's nb blocks is read.
func (a *asm) q8zPrep() {
	a.l(`// func q8zPrep(w *byte, ws int, nb int, corr *int32)`)
	a.l(`TEXT ·q8zPrep(SB), NOSPLIT, $0-32`)
	a.code(`
MOVQ w+0(FP), R11
MOVQ ws+8(FP), R8
MOVQ corr+24(FP), DI
MOVQ nb+16(FP), R12
MOVQ R12, R13
SHRQ $2, R12
ANDQ $3, R13
VPCMPEQB Y15, Y15, Y15
VPABSB Y15, Y15
VPXOR Y14, Y14, Y14
MOVQ $4, R10`)
	a.l("q8zpreprow:")
	a.code(`
MOVQ R11, SI
MOVQ R12, CX
TESTQ CX, CX
JZ q8zpreptail`)
	a.l("q8zprepblk:")
	for k := 0; k < 4; k++ {
		a.l("\tVMOVDQU %d(SI), Y%d", 2+34*k, k)
		a.l("\tVPXOR Y%d, Y%d, Y%d", 4+k, 4+k, 4+k)
		a.l("\tVPDPBUSD Y%d, Y15, Y%d", k, 4+k)
	}
	a.code(`
MOVWQZX (SI), AX
MOVWQZX 34(SI), BX
SHLQ $16, BX
ORQ BX, AX
MOVWQZX 68(SI), BX
SHLQ $32, BX
ORQ BX, AX
MOVWQZX 102(SI), BX
SHLQ $48, BX
ORQ BX, AX`)
	a.q8zPrepStore()
	a.code(`
ADDQ $136, SI
DECQ CX
JNZ q8zprepblk`)
	a.l("q8zpreptail:")
	// the last 1–3 blocks: the same sums, the missing blocks' 0
	a.code(`
TESTQ R13, R13
JZ q8zprepnext
VPXOR Y5, Y5, Y5
VPXOR Y6, Y6, Y6
VPXOR Y7, Y7, Y7`)
	for k := 0; k < 3; k++ {
		if k > 0 {
			a.l("\tCMPQ R13, $%d", k)
			a.l("\tJEQ q8zpreptailsum")
		}
		a.l("\tVMOVDQU %d(SI), Y%d", 2+34*k, k)
		if k == 0 {
			a.l("\tVPXOR Y4, Y4, Y4")
		}
		a.l("\tVPDPBUSD Y%d, Y15, Y%d", k, 4+k)
		if k == 0 {
			a.l("\tMOVWQZX (SI), AX")
			continue
		}
		a.l("\tMOVWQZX %d(SI), BX", 34*k)
		a.l("\tSHLQ $%d, BX", 16*k)
		a.l("\tORQ BX, AX")
	}
	a.l("q8zpreptailsum:")
	a.q8zPrepStore()
	a.l("q8zprepnext:")
	a.code(`
ADDQ R8, R11
DECQ R10
JNZ q8zpreprow
VZEROUPPER
RET`)
}

// q8zPrepStore writes one group's 48 bytes of q8zPrep at DI and moves DI
// on: from the 4 blocks' VPDPBUSD sums of ones and weights in Y4–Y7 the
// −128·Σw of values 0–15 and 16–31, and the scales d_w from the 4 f16 in
// AX.
func (a *asm) q8zPrepStore() {
	a.code(`
VPHADDD Y5, Y4, Y8
VPHADDD Y7, Y6, Y9
VPHADDD Y9, Y8, Y8
VPSLLD $7, Y8, Y8
VPSUBD Y8, Y14, Y8
VMOVDQU Y8, (DI)
VMOVQ AX, X10
VCVTPH2PS X10, X10
VMOVUPS X10, 32(DI)
ADDQ $48, DI`)
}

// q8zTile writes dotQ8_0x4x16TVNNI(w *byte, ws int, pf *byte, xt *uint8,
// xd16 *float32, corr *int32, nb int, out *float32, os int, acc *float32,
// mode int): 4 Q8_0 weight rows ws bytes apart against 16 activation rows
// transposed by 4-byte groups and offset to unsigned (actQ.qz: per block
// and group j of 4 values, the 16 rows' 4 bytes x+128), their scales xd16
// (per block the 16 rows' d_x) and corr from q8zPrep, over nb ≥ 1 blocks:
// 4 per pass of the loop, then a last 1–3 one by one with the same
// operations. mode bit 0 starts the 8 accumulators (per weight row, the
// halves of the blocks) from acc (512 bytes) rather than 0; bit 1 adds
// the halves and stores out[i·os/4+r] = weight row r · activation row i
// (storeZ4x16: os is the output rows' stride in bytes) rather than the
// accumulators to acc. Slices of a reduction called in order (the first
// without bit 0, the last with bit 1) run the fold of one call over all
// its blocks. While it multiplies, it prefetches the 4 rows at pf (ws
// apart: the next weights that q8zPrep reads, so that it reads them from
// cache instead of waiting on memory between two tiles), 3 lines per row
// and pass of 136 bytes.
func (a *asm) q8zTile() {
	a.l(``)
	a.l(`// func dotQ8_0x4x16TVNNI(w *byte, ws int, pf *byte, xt *uint8, xd16 *float32, corr *int32, nb int, out *float32, os int, acc *float32, mode int)`)
	a.l(`TEXT ·dotQ8_0x4x16TVNNI(SB), NOSPLIT, $0-88`)
	a.code(`
MOVQ w+0(FP), SI
MOVQ ws+8(FP), R8
LEAQ (R8)(R8*2), R9
MOVQ pf+16(FP), R13
MOVQ xt+24(FP), DI
MOVQ xd16+32(FP), DX
MOVQ corr+40(FP), BX
MOVQ nb+48(FP), CX
LEAQ 3(CX), R10
SHRQ $2, R10
LEAQ (R10)(R10*2), R10
SHLQ $4, R10
LEAQ (R10)(R10*2), R12
MOVQ CX, R14
ANDQ $3, R14
SHRQ $2, CX
MOVQ acc+72(FP), AX`)
	a.zAccLoad("q8z4x16", 8)
	wrow := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)"}
	crow := []string{"(BX)", "(BX)(R10*1)", "(BX)(R10*2)", "(BX)(R12*1)"}
	prow := []string{"(R13)", "(R13)(R8*1)", "(R13)(R8*2)", "(R13)(R9*1)"}
	// block k of the pass at SI, DI, DX, BX
	block := func(k int, prefetch bool) {
		if prefetch {
			for _, off := range []int{0, 64, 128} {
				a.l("\tPREFETCHT0 %d%s", off, prow[k])
			}
		}
		for r := 0; r < 4; r++ {
			a.l("\tVPBROADCASTD %d%s, Z%d", 4*k, crow[r], 8+2*r)
			a.l("\tVPBROADCASTD %d%s, Z%d", 16+4*k, crow[r], 9+2*r)
		}
		for j := 0; j < 8; j++ {
			x := 16 + j%4
			a.l("\tVMOVDQU64 %d(DI), Z%d", 512*k+64*j, x)
			for r := 0; r < 4; r++ {
				a.l("\tVPDPBUSD.BCST %d%s, Z%d, Z%d", 34*k+2+4*j, wrow[r], x, 8+2*r+j/4)
			}
		}
		a.l("\tVMOVUPS %d(DX), Z20", 64*k)
		for r := 0; r < 4; r++ {
			a.l("\tVMULPS.BCST %d%s, Z20, Z%d", 32+4*k, crow[r], 21+r)
		}
		for r := 0; r < 4; r++ {
			for h := 0; h < 2; h++ {
				a.l("\tVCVTDQ2PS Z%d, Z%d", 8+2*r+h, 8+2*r+h)
				a.l("\tVFMADD231PS Z%d, Z%d, Z%d", 8+2*r+h, 21+r, 2*r+h)
			}
		}
	}
	a.code(`
TESTQ CX, CX
JZ q8z4x16tail`)
	a.l("q8z4x16loop:")
	for k := 0; k < 4; k++ {
		block(k, true)
	}
	a.code(`
ADDQ $136, SI
ADDQ $136, R13
ADDQ $2048, DI
ADDQ $256, DX
ADDQ $48, BX
DECQ CX
JNZ q8z4x16loop`)
	a.l("q8z4x16tail:")
	a.zTail("q8z4x16", block)
	a.zAccStore("q8z4x16", 8)
	a.code(`
MOVQ out+56(FP), AX
MOVQ os+64(FP), R8`)
	for r := 0; r < 4; r++ {
		a.l("\tVADDPS Z%d, Z%d, Z%d", 2*r+1, 2*r, 2*r)
	}
	a.storeZ4x16([4]int{0, 2, 4, 6})
	a.l("%sdone:", "q8z4x16")
	a.code(`
VZEROUPPER
RET`)
}

// zAccLoad starts accumulators Z0..Z(n−1) of the 4×16 tiles from the n·64
// bytes at AX where the tile's mode argument (at mode+80(FP)) has bit 0,
// else from 0.
func (a *asm) zAccLoad(lbl string, n int) {
	a.l("\tTESTQ $1, mode+80(FP)")
	a.l("\tJZ %szero", lbl)
	for r := 0; r < n; r++ {
		a.l("\tVMOVUPS %d(AX), Z%d", 64*r, r)
	}
	a.l("\tJMP %sstart", lbl)
	a.l("%szero:", lbl)
	for r := 0; r < n; r++ {
		a.l("\tVXORPS Z%d, Z%d, Z%d", r, r, r)
	}
	a.l("%sstart:", lbl)
}

// zTail writes the 4×16 tiles' last 1–3 blocks (R14 of them, the
// reduction's blocks modulo 4), each by block(k) at the pass's pointers,
// without prefetches.
func (a *asm) zTail(lbl string, block func(k int, prefetch bool)) {
	a.l("\tTESTQ R14, R14")
	a.l("\tJZ %send", lbl)
	for k := 0; k < 3; k++ {
		if k > 0 {
			a.l("\tCMPQ R14, $%d", k)
			a.l("\tJEQ %send", lbl)
		}
		block(k, false)
	}
	a.l("%send:", lbl)
}

// zAccStore stores accumulators Z0..Z(n−1) to the n·64 bytes at acc (the
// tile's argument at acc+72(FP)) and returns where the tile's mode has
// bit 1 clear; else it goes on to the store of the results.
func (a *asm) zAccStore(lbl string, n int) {
	a.l("\tTESTQ $2, mode+80(FP)")
	a.l("\tJNZ %sout", lbl)
	a.l("\tMOVQ acc+72(FP), AX")
	for r := 0; r < n; r++ {
		a.l("\tVMOVUPS Z%d, %d(AX)", r, 64*r)
	}
	a.l("\tJMP %sdone", lbl)
	a.l("%sout:", lbl)
}

// storeZ4x16 stores a 4×16 tile's results, weight row r's 16 in Z(z[r]),
// as 16 output rows of 4 floats: row i (at AX + i·R8) gets lane i of
// each. A 4×4 transposition within each 128-bit lane (VUNPCKLPS/HPS, then
// VUNPCKLPD/HPD, in Z8–Z15) leaves rows 4L..4L+3 in lane L of Z12–Z15;
// AX and R8 are clobbered.
func (a *asm) storeZ4x16(z [4]int) {
	a.l("\tVUNPCKLPS Z%d, Z%d, Z8", z[1], z[0])
	a.l("\tVUNPCKHPS Z%d, Z%d, Z9", z[1], z[0])
	a.l("\tVUNPCKLPS Z%d, Z%d, Z10", z[3], z[2])
	a.l("\tVUNPCKHPS Z%d, Z%d, Z11", z[3], z[2])
	a.l("\tVUNPCKLPD Z10, Z8, Z12")
	a.l("\tVUNPCKHPD Z10, Z8, Z13")
	a.l("\tVUNPCKLPD Z11, Z9, Z14")
	a.l("\tVUNPCKHPD Z11, Z9, Z15")
	for i := 0; i < 16; i++ {
		l, j := i/4, i%4
		if l == 0 {
			a.l("\tVMOVUPS X%d, (AX)", 12+j)
		} else {
			a.l("\tVEXTRACTF32X4 $%d, Z%d, (AX)", l, 12+j)
		}
		if i < 15 {
			a.l("\tADDQ R8, AX")
		}
	}
}

// q4zPrep writes q4zPrep(w *byte, ws int, nb int, scr *byte): for each of 4
// Q4_0 weight rows ws bytes apart (nb ≥ 1 blocks) and each group of 4
// blocks, 160 bytes at scr + row·g·160 + (b/4)·160 (g = ⌈nb/4⌉ groups per
// row): the 4 blocks' nibbles q (0–15) unpacked in value order (low
// nibbles, then high, as dotQ4_0x8TVNNI unpacks them), 32 bytes each;
// their −128·Σq (int32, Σq by VPSADBW and horizontal adds); their scales
// d_w (float32). A last group of 1–3 blocks (nb%4) is laid out as a
// whole one, its missing blocks' sums and scales 0 and their nibbles not
// written; no byte past a row's nb blocks is read.
func (a *asm) q4zPrep() {
	a.l(``)
	a.l(`// func q4zPrep(w *byte, ws int, nb int, scr *byte)`)
	a.l(`TEXT ·q4zPrep(SB), NOSPLIT, $0-32`)
	a.code(`
MOVQ w+0(FP), R11
MOVQ ws+8(FP), R8
MOVQ scr+24(FP), DI
MOVQ nb+16(FP), R12
MOVQ R12, R13
SHRQ $2, R12
ANDQ $3, R13
VMOVDQU q4zmask0f<>(SB), Y13
VPXOR Y14, Y14, Y14
MOVQ $4, R10`)
	a.l("q4zpreprow:")
	a.code(`
MOVQ R11, SI
MOVQ R12, CX
TESTQ CX, CX
JZ q4zpreptail`)
	// block k's nibbles to scr and their VPSADBW sums in Y(4+k)
	block := func(k int) {
		a.l("\tVMOVDQU %d(SI), X9", 2+18*k)
		a.l("\tVPSRLW $4, X9, X10")
		a.l("\tVINSERTI128 $1, X10, Y9, Y9")
		a.l("\tVPAND Y13, Y9, Y9")
		a.l("\tVMOVDQU Y9, %d(DI)", 32*k)
		a.l("\tVPSADBW Y14, Y9, Y%d", 4+k)
	}
	a.l("q4zprepblk:")
	for k := 0; k < 4; k++ {
		block(k)
	}
	a.code(`
MOVWQZX (SI), AX
MOVWQZX 18(SI), BX
SHLQ $16, BX
ORQ BX, AX
MOVWQZX 36(SI), BX
SHLQ $32, BX
ORQ BX, AX
MOVWQZX 54(SI), BX
SHLQ $48, BX
ORQ BX, AX`)
	a.q4zPrepStore()
	a.code(`
ADDQ $72, SI
DECQ CX
JNZ q4zprepblk`)
	a.l("q4zpreptail:")
	a.code(`
TESTQ R13, R13
JZ q4zprepnext
VPXOR Y5, Y5, Y5
VPXOR Y6, Y6, Y6
VPXOR Y7, Y7, Y7`)
	for k := 0; k < 3; k++ {
		if k > 0 {
			a.l("\tCMPQ R13, $%d", k)
			a.l("\tJEQ q4zpreptailsum")
		}
		block(k)
		if k == 0 {
			a.l("\tMOVWQZX (SI), AX")
			continue
		}
		a.l("\tMOVWQZX %d(SI), BX", 18*k)
		a.l("\tSHLQ $%d, BX", 16*k)
		a.l("\tORQ BX, AX")
	}
	a.l("q4zpreptailsum:")
	a.q4zPrepStore()
	a.l("q4zprepnext:")
	a.code(`
ADDQ R8, R11
DECQ R10
JNZ q4zpreprow
VZEROUPPER
RET`)
}

// q4zPrepStore writes one group's −128·Σq and scales of q4zPrep at
// 128(DI) and moves DI on by the group's 160 bytes: Σq from the 4 blocks'
// VPSADBW sums in Y4–Y7, the scales d_w from the 4 f16 in AX.
func (a *asm) q4zPrepStore() {
	a.code(`
VPHADDD Y5, Y4, Y8
VPHADDD Y7, Y6, Y9
VPHADDD Y9, Y8, Y8
VEXTRACTI128 $1, Y8, X9
VPADDD X9, X8, X8
VPSLLD $7, X8, X8
VPSUBD X8, X14, X8
VMOVDQU X8, 128(DI)
VMOVQ AX, X10
VCVTPH2PS X10, X10
VMOVUPS X10, 144(DI)
ADDQ $160, DI`)
}

// q4zTile writes dotQ4_0x4x16TVNNI(scr *byte, pf *byte, ps int, xt *uint8,
// xd16 *float32, s16 *int32, nb int, out *float32, os int, acc *float32,
// mode int): 4 Q4_0 weight rows prepared by q4zPrep (scr) against 16
// activation rows in dotQ8_0x4x16TVNNI's layout (xt, xd16) with their
// 8·Σx per block (s16: per block the 16 rows'), over nb ≥ 1 blocks (4 per
// pass, then a last 1–3 one by one); out[i·os/4+r] = weight row r ·
// activation row i (storeZ4x16). Per row and block the accumulator starts
// at −(128·Σq + 8·Σx) and ends at Σ(q−8)·x, the exact block sum of
// dotQ4_0x8TVNNI and dotQ4_0x8UAVX2; the fold is theirs (one conversion
// and one fused multiply-add with d_w·d_x per block, +0 at the end), so
// the results equal theirs bit for bit. mode is dotQ8_0x4x16TVNNI's (the
// 4 float accumulators, 256 bytes, from and to acc; +0 added only at the
// store to out), so slices called in order run the fold of one call.
// While it multiplies, it prefetches the 4 Q4_0 rows at pf (ps bytes
// apart: the next weights q4zPrep reads), 2 lines per row and pass of 72
// bytes.
func (a *asm) q4zTile() {
	a.l(``)
	a.l(`// func dotQ4_0x4x16TVNNI(scr *byte, pf *byte, ps int, xt *uint8, xd16 *float32, s16 *int32, nb int, out *float32, os int, acc *float32, mode int)`)
	a.l(`TEXT ·dotQ4_0x4x16TVNNI(SB), NOSPLIT, $0-88`)
	a.code(`
MOVQ scr+0(FP), BX
MOVQ pf+8(FP), SI
MOVQ ps+16(FP), R8
LEAQ (R8)(R8*2), R9
MOVQ xt+24(FP), DI
MOVQ xd16+32(FP), DX
MOVQ s16+40(FP), R11
MOVQ nb+48(FP), CX
LEAQ 3(CX), R10
SHRQ $2, R10
LEAQ (R10)(R10*4), R10
SHLQ $5, R10
LEAQ (R10)(R10*2), R12
MOVQ CX, R14
ANDQ $3, R14
SHRQ $2, CX
MOVQ acc+72(FP), AX`)
	a.zAccLoad("q4z4x16", 4)
	srow := []string{"(BX)", "(BX)(R10*1)", "(BX)(R10*2)", "(BX)(R12*1)"}
	prow := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)"}
	block := func(k int, prefetch bool) {
		if prefetch {
			for _, off := range []int{0, 64} {
				a.l("\tPREFETCHT0 %d%s", off, prow[k])
			}
		}
		a.l("\tVMOVDQU32 %d(R11), Z20", 64*k)
		for r := 0; r < 4; r++ {
			a.l("\tVPBROADCASTD %d%s, Z%d", 128+4*k, srow[r], 8+r)
			a.l("\tVPSUBD Z20, Z%d, Z%d", 8+r, 8+r)
		}
		for j := 0; j < 8; j++ {
			x := 16 + j%4
			a.l("\tVMOVDQU64 %d(DI), Z%d", 512*k+64*j, x)
			for r := 0; r < 4; r++ {
				a.l("\tVPDPBUSD.BCST %d%s, Z%d, Z%d", 32*k+4*j, srow[r], x, 8+r)
			}
		}
		a.l("\tVMOVUPS %d(DX), Z21", 64*k)
		for r := 0; r < 4; r++ {
			a.l("\tVMULPS.BCST %d%s, Z21, Z%d", 144+4*k, srow[r], 22+r)
		}
		for r := 0; r < 4; r++ {
			a.l("\tVCVTDQ2PS Z%d, Z%d", 8+r, 8+r)
			a.l("\tVFMADD231PS Z%d, Z%d, Z%d", 8+r, 22+r, r)
		}
	}
	a.code(`
TESTQ CX, CX
JZ q4z4x16tail`)
	a.l("q4z4x16loop:")
	for k := 0; k < 4; k++ {
		block(k, true)
	}
	a.code(`
ADDQ $160, BX
ADDQ $72, SI
ADDQ $2048, DI
ADDQ $256, DX
ADDQ $256, R11
DECQ CX
JNZ q4z4x16loop`)
	a.l("q4z4x16tail:")
	a.zTail("q4z4x16", block)
	a.zAccStore("q4z4x16", 4)
	a.code(`
MOVQ out+56(FP), AX
MOVQ os+64(FP), R8
VXORPS Z30, Z30, Z30`)
	for r := 0; r < 4; r++ {
		a.l("\tVADDPS Z30, Z%d, Z%d", r, r)
	}
	a.storeZ4x16([4]int{0, 1, 2, 3})
	a.l("%sdone:", "q4z4x16")
	a.code(`
VZEROUPPER
RET`)
}
