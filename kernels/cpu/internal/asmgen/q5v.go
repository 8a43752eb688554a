package asmgen

import (
	"fmt"
	"strings"
)

// q5vFile writes q5v_amd64.s: the AVX-512 VNNI twin of dotQ5Kx8AVX2 (see
// kernels/cpu/q5v.go).
func q5vFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q5_K ×8 tile on AVX-512 VNNI (see q5v.go): dotQ5Kx8AVX2's decode,
// with each group's two 32-value sub-blocks joined in one Z register and
// met by each activation row's 64 contiguous values in one VPMADDUBSW and
// one VPDPWSSD (the pair of scales in the two 256-bit halves) where the
// AVX2 tile spends two VPMADDUBSW, two VPMADDWD and two VPADDD. The two
// halves' int32 lanes are added before the fold: each 128-bit lane then
// sums exactly the products dotQ5Kx8AVX2's lane sums (values 0-15 or
// 16-31 of every sub-block), and the fold is kFold8's, so the results
// equal it bit for bit.
//
// dotQ5KTxNVNNI is the Q5_K tile on transposed super-blocks (the Q4_K
// tiles' layout, actQ.kt) for pairs of weight rows, one per 256-bit half
// of the Z registers, as dotQ6KTxNVNNI: a row's 8 products of 32 values
// add as words in two runs of 4 (exact: |sum| ≤ 4·2·31·128 < 2^15; 8 would
// not be), each run scaled and added by one VPDPWSSD; the lanes hold values
// 0-15 or 16-31 of every sub-block as dotQ5Kx8AVX2's, the mins come from
// the 32-value sums (actQ.bp) as in dotQ4KTxNAVX2, and the float fold is
// kFold8's per element, so its results equal dotQ5Kx8AVX2's bit for bit.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.l("%s", k4vData())
	a.l("%s", k4vScaleData())
	a.l("%s", q5kvData())
	a.q5x8v()
	a.q5tnv()
	a.kvtTile(1, kvtQ5K)
	a.kvtTile(2, kvtQ5K)
	a.kvtnTile(kvtQ5K)
	return a.b.String()
}

// q5x8v writes dotQ5Kx8VNNI (kx8's Q5_K tile with the groups on Z
// registers: Z16 the group's 64 values, Z17 its scales, Z18 a product;
// Z0-Z7 the rows' int32 lanes, folded to Y0-Y7 before kFold8).
func (a *asm) q5x8v() {
	a.l(``)
	a.l(`// func dotQ5Kx8VNNI(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)`)
	a.l(`TEXT ·dotQ5Kx8VNNI(SB), NOSPLIT, $128-64`)
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
VXORPS Y9, Y9, Y9
VMOVUPS Y8, 64(SP)
VMOVUPS Y8, 96(SP)`)
	a.l("q5kx8vloop:")
	a.code("KSCALES8\nVMOVDQU 16(SI), Y8")
	for g := 0; g < 4; g++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y10
VPSRLW $4, Y10, Y11
VPAND Y14, Y10, Y10
VPAND Y14, Y11, Y11`, 48+32*g))
		a.code(q5bits("Y8", 4-2*g, "Y15", "t8mask10<>(SB)", "Y10"))
		a.code(q5bits("Y8", 3-2*g, "Y15", "t8mask10<>(SB)", "Y11"))
		a.code(fmt.Sprintf(`
VINSERTI64X4 $1, Y11, Z10, Z16
VPBROADCASTW %d(SP), Y12
VPBROADCASTW %d(SP), Y13
VINSERTI64X4 $1, Y13, Z12, Z17`, 4*g, 4*g+2))
		for r := 0; r < 8; r++ {
			a.l("\tVPMADDUBSW %s, Z16, Z18", rowAt(r, 64*g))
			if g == 0 {
				a.l("\tVPMADDWD Z17, Z18, Z%d", r)
			} else {
				a.l("\tVPDPWSSD Z17, Z18, Z%d", r)
			}
		}
	}
	for r := 0; r < 8; r++ {
		a.l("\tVEXTRACTI64X4 $1, Z%d, Y18", r)
		a.l("\tVPADDD Y18, Y%d, Y%d", r, r)
	}
	a.code("VMOVUPS 64(SP), Y8\nVMOVUPS 96(SP), Y9")
	a.code(kFold8(true))
	a.code(`
VMOVUPS Y8, 64(SP)
VMOVUPS Y9, 96(SP)
ADDQ $176, SI
ADDQ $256, DI
ADDQ $256, R11
ADDQ $64, DX
ADDQ $32, BX
ADDQ $32, R10
DECQ CX
JNZ q5kx8vloop
MOVQ out+56(FP), AX
OUT8(Y8, X8, Y9, X9)
VZEROUPPER
RET`)
}

// q5tnDecode writes the head of a Q5_K super-block (SI) of dotQ5KTxNVNNI:
// kxtDecode's with the fifth bits from qh (Y12) ORed into each sub-block:
// scales as words at 0(SP), mins at 32(SP), d and dmin at 64(SP), the
// super-block transposed into Y8-Y15, the scales broadcast in Y7.
func (a *asm) q5tnDecode() {
	a.code(`
VMOVDQU t8mask0f<>(SB), Y14
KSCALES8
MOVL (SI), AX
VMOVD AX, X0
VCVTPH2PS X0, X0
VMOVQ X0, 64(SP)
VMOVDQU 16(SI), Y12`)
	for g := 0; g < 4; g++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y%d
VPSRLW $4, Y%d, Y%d
VPAND Y14, Y%d, Y%d
VPAND Y14, Y%d, Y%d`, 48+32*g, 2*g, 2*g, 2*g+1, 2*g, 2*g, 2*g+1, 2*g+1))
		a.code(q5bits("Y12", 4-2*g, "Y13", "t8mask10<>(SB)", fmt.Sprintf("Y%d", 2*g)))
		a.code(q5bits("Y12", 3-2*g, "Y13", "t8mask10<>(SB)", fmt.Sprintf("Y%d", 2*g+1)))
	}
	a.transposeW8()
	a.l("\tVBROADCASTI128 0(SP), Y7")
}

// q5tnv writes dotQ5KTxNVNNI: the products of rows (even) Q5_K weight
// rows (rb bytes apart) with 8·groups activation rows, stored into out (os
// floats apart per activation row, one float per weight row), in pairs of
// weight rows. The loop runs over super-blocks, then pairs, then groups,
// as dotQ4KTxNAVX2's; acc holds per pair and group 128 bytes (pairStore's
// layout). Frame: KSCALES8's scales at 0(SP) and mins at 32(SP), d and
// dmin at 64(SP), the pairs left at 72(SP). Registers as dotQ4KTxNAVX2's;
// Z8-Z15 the pair's transposed super-blocks, Z7 its scales, Z25 its
// mins, Z26 and Z27 d and dmin (8 floats per row), Z16-Z24 the first
// row's while the second is decoded.
func (a *asm) q5tnv() {
	a.l(``)
	a.l(`// func dotQ5KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)`)
	a.l(`TEXT ·dotQ5KTxNVNNI(SB), NOSPLIT, $96-104`)
	a.code(`
MOVQ nb+48(FP), R15
MOVQ gs+88(FP), R14
SHLQ $6, R15
MOVQ acc+80(FP), R10
MOVQ rows+16(FP), R9
IMULQ groups+72(FP), R9
VXORPS Y0, Y0, Y0`)
	a.l("q5vzero:")
	a.code(`
VMOVUPS Y0, (R10)
VMOVUPS Y0, 32(R10)
ADDQ $64, R10
DECQ R9
JNZ q5vzero
MOVQ w+0(FP), R8
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ bp+40(FP), BX
MOVQ nb+48(FP), CX`)
	a.l("q5vloop:")
	a.code(`
MOVQ R8, SI
MOVQ acc+80(FP), R10
MOVQ rows+16(FP), R9
SHRQ $1, R9
MOVQ R9, 72(SP)`)
	a.l("q5vrow:")
	for half := 0; half < 2; half++ {
		a.code(`
PREFETCHT0 704(SI)
PREFETCHT0 768(SI)
PREFETCHT0 832(SI)
PREFETCHT0 879(SI)`)
		a.q5tnDecode()
		if half == 0 {
			for v := 0; v < 8; v++ {
				a.l("\tVMOVDQU64 Y%d, Y%d", 8+v, 16+v)
			}
			a.code(`
VMOVDQU64 Y7, Y24
VMOVDQU64 32(SP), Y25
VBROADCASTSS 64(SP), Y26
VBROADCASTSS 68(SP), Y27
ADDQ rb+8(FP), SI`)
			continue
		}
		for v := 0; v < 8; v++ {
			a.l("\tVINSERTI64X4 $1, Y%d, Z%d, Z%d", 8+v, 16+v, 8+v)
		}
		a.code(`
VINSERTI64X4 $1, Y7, Z24, Z7
VINSERTI64X4 $1, 32(SP), Z25, Z25
VBROADCASTSS 64(SP), Y28
VINSERTF64X4 $1, Y28, Z26, Z26
VBROADCASTSS 68(SP), Y28
VINSERTF64X4 $1, Y28, Z27, Z27`)
	}
	a.code(`
MOVQ DI, R11
MOVQ DX, R12
MOVQ BX, R13
MOVQ groups+72(FP), R9`)
	a.l("q5vgroup:")
	for half := 0; half < 2; half++ {
		act := func(r, v int) string { return fmt.Sprintf("%d(R11)", (4*half+r)*256+32*v) }
		a.q5vHalf(act, fmt.Sprintf("%d(R13)", 64*half), fmt.Sprintf("%d(R13)", 64*half+32),
			fmt.Sprintf("%d(R12)", 32*half), fmt.Sprintf("%d(R10)", 64*half))
	}
	a.code(`
ADDQ R14, R11
ADDQ R15, R12
ADDQ R15, R13
ADDQ R15, R13
ADDQ $128, R10
DECQ R9
JNZ q5vgroup
ADDQ rb+8(FP), SI
DECQ 72(SP)
JNZ q5vrow
ADDQ $176, R8
ADDQ ss+96(FP), DI
ADDQ $64, DX
ADDQ $128, BX
DECQ CX
JNZ q5vloop`)
	a.pairStore("q5v", 56, 64, 72, 80)
}

// q5vHalf writes the products of 4 activation rows (act(r, v): row r's
// 32-byte chunk v, broadcast to both halves) with the pair's transposed
// super-blocks (Z8-Z15) and their fold into the pair's float accumulators
// at acc: per row the word sums of chunks 0-3 and 4-7 each scaled and
// added by VPMADDWD / VPDPWSSD (Z7); the lanes of the 4 rows added by
// unpacks (HADD4's sums); the mins from the 32-value sums at bp0 and bp1
// (Z25; VPHADDD's sums by shuffles); d·xd and dmin·xd (Z26, Z27) as
// kxtHalf. Clobbers Z0-Z6, Z16, Z17.
func (a *asm) q5vHalf(act func(r, v int) string, bp0, bp1, xd, acc string) {
	for r := 0; r < 4; r++ {
		for run := 0; run < 2; run++ {
			sum := 4 + run
			for v := 4 * run; v < 4*run+4; v++ {
				ld := 16 + v%2
				a.l("\tVBROADCASTI64X4 %s, Z%d", act(r, v), ld)
				if v%4 == 0 {
					a.l("\tVPMADDUBSW Z%d, Z%d, Z%d", ld, 8+v, sum)
					continue
				}
				a.l("\tVPMADDUBSW Z%d, Z%d, Z6", ld, 8+v)
				a.l("\tVPADDW Z6, Z%d, Z%d", sum, sum)
			}
		}
		a.l("\tVPMADDWD Z7, Z4, Z%d", r)
		a.l("\tVPDPWSSD Z7, Z5, Z%d", r)
	}
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
VBROADCASTI64X4 %s, Z16
VPMADDWD Z16, Z25, Z2
VBROADCASTI64X4 %s, Z17
VPMADDWD Z17, Z25, Z3
VSHUFPS $0x88, Z3, Z2, Z4
VSHUFPS $0xdd, Z3, Z2, Z5
VPADDD Z5, Z4, Z2
VCVTDQ2PS Z2, Z2
VBROADCASTF64X4 %s, Z4
VMULPS Z4, Z26, Z5
VMULPS Z4, Z27, Z4
VMOVUPS %s, Z6
VFMADD231PS Z0, Z5, Z6
VFNMADD231PS Z2, Z4, Z6
VMOVUPS Z6, %s`, bp0, bp1, xd, acc, acc))
}

// q5kvV returns value V_k(p) of a sub-block half that byte 4i+p of
// vector k of the k4v layout holds (k4vFile: vector pair k/2, low nibbles
// for k even, the values two further on for k odd).
func q5kvV(k, p int) int {
	return 8*(k/2) + 2*(k%2) + 4*(p/2) + p%2
}

// q5kvData returns dotQ5KTxNKV's constants: the VPERMI2B indices that
// gather, for each of the four vectors, the byte of the super-block's
// quants (qs, 128 bytes) holding each value (q5kvidx, 4 × 64 bytes); the
// dword shifts that bring the high nibbles of the odd sub-blocks' lanes
// down (q5kvsh); the VPMULTISHIFTQB controls that move each value's fifth
// bit (bit w of qh[l], qh's qword of the lane's half and vector pair in
// the source qword) to bit 4 (q5kvms, for even and odd vectors); 0x10
// bytes (q5kv10).
func q5kvData() string {
	var b strings.Builder
	bytes := func(name string, v []byte) {
		for o := 0; o < len(v); o += 8 {
			var q uint64
			for k := 7; k >= 0; k-- {
				q = q<<8 | uint64(v[o+k])
			}
			fmt.Fprintf(&b, "DATA %s<>+%d(SB)/8, $0x%016x\n", name, o, q)
		}
		fmt.Fprintf(&b, "GLOBL %s<>(SB), RODATA|NOPTR, $%d\n", name, len(v))
	}
	idx := make([]byte, 256)
	ms := make([]byte, 128)
	sh := make([]byte, 64)
	for i := 0; i < 16; i++ {
		w, h := k4vLane(i)
		sh[4*i] = byte(4 * (w % 2))
		for p := 0; p < 4; p++ {
			for k := 0; k < 4; k++ {
				idx[64*k+4*i+p] = byte(32*(w/2) + 16*h + q5kvV(k, p))
			}
			for k := 0; k < 2; k++ {
				ms[64*k+4*i+p] = byte((8*(q5kvV(k, p)%8) + w - 4 + 64) % 64)
			}
		}
	}
	bytes("q5kvidx", idx)
	bytes("q5kvms", ms)
	bytes("q5kvsh", sh)
	ten := make([]byte, 64)
	for i := range ten {
		ten[i] = 0x10
	}
	bytes("q5kv10", ten)
	return b.String()
}

// q5kvConsts loads dotQ5KTxNKV's register constants: kvtConsts' but for
// the VPERMT2B indices (0x0f bytes in Z14, the scales' and mins' VPERMW
// indices in Z18 and Z19, kvtScales' in Y23, Y24, Y29, K1, K2), and the
// VPMULTISHIFTQB controls in Z16 (even vectors) and Z17 (odd).
const q5kvConsts = `VBROADCASTI64X4 t8mask0f<>(SB), Z14
VMOVDQU64 q5kvms<>(SB), Z16
VMOVDQU64 q5kvms<>+64(SB), Z17
` + kvtScaleConsts

// q5kvDecode writes the head of a Q5_K super-block (SI) of dotQ5KTxNKV:
// kvtHead's scales (Z15), mins (Z12), d and dmin (Z13, Z20) — Q5_K
// packs them as Q4_K does — and its 256 values, 0-31 as bytes, in k4v's
// layout in Z8-Z11: per vector one VPERMI2B gathers the bytes of qs that
// hold the values, a VPSRLVD and a VPANDD keep the lane's nibble, and a
// VPMULTISHIFTQB of qh's qwords (VPERMQ'd per vector pair) and a
// VPTERNLOGD put in the fifth bit. Clobbers Z0-Z4.
func (a *asm) q5kvDecode() {
	a.kvtHead()
	a.code(`
VBROADCASTI64X4 16(SI), Z0
VPERMQ $0xa0, Z0, Z2
VPERMQ $0xf5, Z0, Z3
VMOVDQU64 48(SI), Z0`)
	for k := 0; k < 4; k++ {
		z := 8 + k
		a.code(fmt.Sprintf(`
VMOVDQU64 q5kvidx<>+%d(SB), Z%d
VPERMI2B 112(SI), Z0, Z%d
VPSRLVD q5kvsh<>(SB), Z%d, Z%d
VPANDD Z14, Z%d, Z%d
VPMULTISHIFTQB Z%d, Z%d, Z4
VPTERNLOGD $0xf8, q5kv10<>(SB), Z4, Z%d`, 64*k, z, z, z, z, z, z, 2+k/2, 16+k%2, z))
	}
}

// q5kvGroup writes the products of a group of 8 activation rows (act(r,
// v): row r's 64-byte vector v in actQ.kv) with the super-block in
// Z8-Z11 and their fold into acc, as kvtGroup: per row two VPDPBUSD into
// each of two dwords per lane (values 0-7 and 8-15 of the lane's
// sub-block half: at most 8·31·128 < 2^15, so both pack into words
// exactly, where the 16 values kvtGroup sums in one lane would not), per
// two rows two VPACKSSDW, one VPMADDWD and one VPDPWSSD by the scales:
// the dwords kvtGroup's VPMADDWD leaves, then kvtFold. Clobbers Z0-Z7,
// Z25-Z28.
func (a *asm) q5kvGroup(act func(r, v int) string, bp func(o int) string, xd, acc string) {
	for pr := 0; pr < 4; pr++ {
		t := 4 * (pr % 2)
		for j := 0; j < 2; j++ {
			for c := 0; c < 2; c++ {
				z := t + 2*j + c
				a.l("\tVPXORD Z%d, Z%d, Z%d", z, z, z)
				for v := 2 * c; v < 2*c+2; v++ {
					a.l("\tVPDPBUSD %s, Z%d, Z%d", act(2*pr+j, v), 8+v, z)
				}
			}
		}
		a.l("\tVPACKSSDW Z%d, Z%d, Z%d", t+2, t, 25+pr)
		a.l("\tVPACKSSDW Z%d, Z%d, Z%d", t+3, t+1, t+1)
		a.l("\tVPMADDWD Z15, Z%d, Z%d", 25+pr, 25+pr)
		a.l("\tVPDPWSSD Z15, Z%d, Z%d", t+1, 25+pr)
	}
	a.kvtFold(bp, xd, acc)
}

// kvtQ5K is the Q5_K super-block (the file's layout) of dotQ5KTx8KV,
// dotQ5KTx16KV and dotQ5KTxNKV: dotQ4KTx8VNNI's, dotQ4KTx16VNNI's and
// dotQ4KTxNVNNI's loops with q5kvDecode and q5kvGroup.
var kvtQ5K = kvtWeights{
	stem: "dotQ5KTx%dKV", lbl: "q5kv%d", consts: q5kvConsts,
	decode: (*asm).q5kvDecode, group: (*asm).q5kvGroup, sb: 176,
	prefetch: []int{1408, 1472, 1536},
	nName:    "dotQ5KTxNKV", nLbl: "q5kvn", nPrefetch: []int{704, 768, 832, 879},
}
