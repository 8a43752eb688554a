package asmgen

import (
	"fmt"
	"strings"
)

// q6kvFile writes q6kv_amd64.s: the Q6_K super-blocks (the file's layout)
// on k4v.go's ×16 VPDPBUSD tile over slices of the reduction
// (dotQ6KTx16KVS; see kernels/cpu/q6kv.go). The ×8 and ×N tiles are not
// written: on Q6_K they were slower than dotQ6KTxNVNNI (BenchmarkQ6KV,
// docs/BENCHMARKS.md i17q6s), and so were pairs of ×16 tiles at 128 rows
// (i17q6d).
func q6kvFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q6_K tiles on actQ.kv with AVX512_VNNI and AVX512_VBMI (see q6kv.go
// in package asmgen and in kernels/cpu): k4v's loops, a Q6_K decode into
// k4v's byte order and per activation row four VPDPBUSD of the 6-bit
// values (0-63) into one dword per sub-block of 16 values, multiplied by
// the sub-block's scale (VPMULLD) and corrected by −32·scale times the
// row's 16-value sums (VPDPWSSD from actQ.b6).`)
	a.l(``)
	a.l("%s", q6kvData())
	a.kvsTile(kvtQ6K)
	return a.b.String()
}

// q6kvData returns the Q6_K tiles' constants. Byte 4i+p of vector k holds
// value 32w+l of the super-block, w and h lane i's sub-block and half
// (k4vLane) and l = 16h+q5kvV(k, p); with half f = w/4 and quarter s =
// w%4 of the super-block, its low four bits are nibble s/2 of ql byte
// 64f+32(s%2)+l, its high two bits 2s and 2s+1 of qh byte 32f+l
// (ggml's dequantize_row_q6_K). q6kvidx and q6kvhidx are the VPERMI2B and
// VPERMB indices of those bytes (4 × 64 bytes each), q6kvsh the dword
// shifts of the nibbles, q6kvms the VPMULTISHIFTQB controls that move
// bits 2s, 2s+1 of a byte to bits 4-5, q6kv30 and q6kv0f 0x30 and 0x0f
// bytes; q6kvsp the
// VPSHUFB that puts sub-block 2w+h's scale in byte i.
func q6kvData() string {
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
	hidx := make([]byte, 256)
	ms := make([]byte, 64)
	sh := make([]byte, 64)
	sp := make([]byte, 16)
	for i := 0; i < 16; i++ {
		w, h := k4vLane(i)
		f, s := w/4, w%4
		sh[4*i] = byte(4 * (s / 2))
		sp[i] = byte(2*w + h)
		for p := 0; p < 4; p++ {
			j := 4*i + p
			ms[j] = byte((8*(j%8) + 2*s - 4 + 64) % 64)
			for k := 0; k < 4; k++ {
				l := 16*h + q5kvV(k, p)
				idx[64*k+j] = byte(64*f + 32*(s%2) + l)
				hidx[64*k+j] = byte(32*f + l)
			}
		}
	}
	bytes("q6kvidx", idx)
	bytes("q6kvhidx", hidx)
	bytes("q6kvms", ms)
	bytes("q6kvsh", sh)
	bytes("q6kvsp", sp)
	c30 := make([]byte, 64)
	for i := range c30 {
		c30[i] = 0x30
	}
	bytes("q6kv30", c30)
	c0f := make([]byte, 64)
	for i := range c0f {
		c0f[i] = 0x0f
	}
	bytes("q6kv0f", c0f)
	return b.String()
}

// q6kvConsts loads the Q6_K tiles' register constants: 0x0f bytes in Z14,
// the VPMULTISHIFTQB controls in Z16.
const q6kvConsts = `VMOVDQU64 q6kv0f<>(SB), Z14
VMOVDQU64 q6kvms<>(SB), Z16`

// q6kvDecode writes the head of a Q6_K super-block (SI, 210 bytes: ql,
// qh, 16 int8 scales, f16 d): the scales as dwords in lane order in Z15,
// −32 × the scales as words in Z12 (sub-blocks 0-15 in the low 256 bits,
// the high 256 bits 0), d broadcast in Z13, and the 256 values (0-63) in k4v's layout
// in Z8-Z11: per vector a VPERMI2B of ql, VPSRLVD and VPANDD keep the
// nibble, a VPERMB of qh, VPMULTISHIFTQB and VPTERNLOGD put in the two
// high bits. d is read as a word (VCVTPH2PS of memory would read past
// the block). Clobbers Z0-Z4.
func (a *asm) q6kvDecode() {
	a.code(`
VMOVDQU 192(SI), X1
VPSHUFB q6kvsp<>(SB), X1, X2
VPMOVSXBD X2, Z15
VPMOVSXBW X1, Y1
VPSLLW $5, Y1, Y1
VPXOR Y2, Y2, Y2
VPSUBW Y1, Y2, Y12
MOVWLZX 208(SI), AX
VMOVD AX, X3
VCVTPH2PS X3, X3
VBROADCASTSS X3, Z13
VMOVDQU64 (SI), Z0`)
	for k := 0; k < 4; k++ {
		z := 8 + k
		a.code(fmt.Sprintf(`
VMOVDQU64 q6kvidx<>+%d(SB), Z%d
VPERMI2B 64(SI), Z0, Z%d
VPSRLVD q6kvsh<>(SB), Z%d, Z%d
VPANDD Z14, Z%d, Z%d
VMOVDQU64 q6kvhidx<>+%d(SB), Z4
VPERMB 128(SI), Z4, Z4
VPMULTISHIFTQB Z4, Z16, Z4
VPTERNLOGD $0xf8, q6kv30<>(SB), Z4, Z%d`, 64*k, z, z, z, z, z, z, 64*k, z))
	}
}

// q6kvGroup writes the products of a group of 8 activation rows (act(r,
// v): row r's 64-byte vector v in actQ.kv) with the Q6_K super-block in
// Z8-Z11 and their fold into acc: per row four VPDPBUSD into one dword
// per sub-block (at most 16·63·128, exact), a VPMULLD by the scales (Z15)
// and a VPDPWSSD of the row's 16-value sums (actQ.b6, bp(64r): sub-blocks
// 0-7 in 128-bit lane 0, 8-15 in lane 1) by −32 × the scales (Z12): lanes
// 0 and 2 then hold the products of values 0-15 of each 32-value chunk
// and the offsets of sub-blocks 0-7, lanes 1 and 3 the rest, the two
// integers dotQ6KTxNAVX2's 128-bit lanes sum (its offsets' VPMADDWD on the
// sums in their order). The lanes of each 4 rows are added by
// unpacks into [rows 0-3] per 128-bit lane and the lanes of the same half
// added (kvtFold's layout: rows 0-3 halves 0, 1; rows 4-7 halves 0, 1),
// converted, multiplied by d·xd and added into acc as dotQ6KTxNAVX2 does.
// Clobbers Z0-Z7, Z25-Z28.
func (a *asm) q6kvGroup(act func(r, v int) string, bp func(o int) string, xd, acc string) {
	for r := 0; r < 8; r++ {
		a.l("\tVPXORD Z%d, Z%d, Z%d", r, r, r)
		for v := 0; v < 4; v++ {
			a.l("\tVPDPBUSD %s, Z%d, Z%d", act(r, v), 8+v, r)
		}
		a.l("\tVPMULLD Z15, Z%d, Z%d", r, r)
		a.l("\tVPDPWSSD %s, Z12, Z%d", bp(64*r), r)
	}
	for q := 0; q < 2; q++ {
		b := 4 * q
		a.code(fmt.Sprintf(`
VPUNPCKLDQ Z%d, Z%d, Z25
VPUNPCKHDQ Z%d, Z%d, Z26
VPADDD Z26, Z25, Z%d
VPUNPCKLDQ Z%d, Z%d, Z27
VPUNPCKHDQ Z%d, Z%d, Z28
VPADDD Z28, Z27, Z%d
VPUNPCKLQDQ Z%d, Z%d, Z25
VPUNPCKHQDQ Z%d, Z%d, Z26
VPADDD Z26, Z25, Z%d`, b+1, b, b+1, b, b, b+3, b+2, b+3, b+2, b+2, b+2, b, b+2, b, b))
	}
	dst := acc
	if strings.Contains(acc, "(") {
		dst = "Z6"
	}
	a.code(`
VSHUFI64X2 $0x44, Z4, Z0, Z1
VSHUFI64X2 $0xee, Z4, Z0, Z2
VPADDD Z2, Z1, Z0
VCVTDQ2PS Z0, Z0`)
	if dst == "Z6" {
		a.l("\tVMOVUPS %s, Z6", acc)
	}
	a.code(fmt.Sprintf(`
VMULPS %s, Z13, Z4
VFMADD231PS Z0, Z4, %s`, xd, dst))
	if dst == "Z6" {
		a.l("\tVMOVUPS Z6, %s", acc)
	}
}

// kvtQ6K is the Q6_K super-block (the file's layout) of dotQ6KTx16KVS:
// dotQ4KTx16VNNI's loop with q6kvDecode and q6kvGroup; their bp argument is actQ.b6 (512 bytes per
// group and super-block).
var kvtQ6K = kvtWeights{
	stem: "dotQ6KTx%dKV", lbl: "q6kv%d", consts: q6kvConsts,
	decode: (*asm).q6kvDecode, group: (*asm).q6kvGroup, sb: 210,
	prefetch: []int{1680, 1744, 1808, 1889},
	bpStep:   512, bpScale: 8,
}

// kvsTile writes dotQ6KTx16KVS: kvtTile's ×16 loop (two groups of 8
// activation rows, accumulators in registers) over a slice of n of a
// reduction's nb super-blocks, the groups gs bytes apart in xt and its
// super-blocks ss apart (ktStrides, either layout), so that a block of
// weight rows meets a slice's activations (4 KiB per super-block) from
// L1. mode bit 0 starts each weight row's accumulators from acc (128
// bytes per weight row, the previous slice's) rather than from 0, bit 1
// adds the halves and stores the results to out (kvtTile's store) rather
// than the accumulators to acc: the float fold runs over the
// super-blocks in the order of one call over all of them, so the
// results are kvtTile's bit for bit. The weights are prefetched one row
// ahead at the same super-block (the next row's slice is read next).
func (a *asm) kvsTile(kw kvtWeights) {
	name := strings.Replace(fmt.Sprintf(kw.stem, 16), "KV", "KVS", 1)
	lbl := fmt.Sprintf(kw.lbl, 16) + "s"
	a.l(``)
	a.l(`// func %s(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, acc *float32, gs int, ss int, n int, mode int)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-112`, name)
	a.code(kw.consts)
	a.code(`
MOVQ w+0(FP), R8
MOVQ rows+16(FP), R9
MOVQ out+56(FP), R10
MOVQ acc+72(FP), R11
MOVQ ss+88(FP), R12
MOVQ rb+8(FP), R13
MOVQ gs+80(FP), R14
MOVQ nb+48(FP), R15
SHLQ $6, R15`)
	a.l("%srow:", lbl)
	a.code(`
MOVQ R8, SI
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ bp+40(FP), BX
MOVQ n+96(FP), CX
TESTQ $1, mode+104(FP)`)
	a.l("\tJZ %szero", lbl)
	a.code(`
VMOVUPS (R11), Z21
VMOVUPS 64(R11), Z22`)
	a.l("\tJMP %sloop", lbl)
	a.l("%szero:", lbl)
	a.code(`
VPXORD Z21, Z21, Z21
VPXORD Z22, Z22, Z22`)
	a.l("%sloop:", lbl)
	for _, o := range kw.prefetch {
		a.l("\tPREFETCHT0 %d(SI)(R13*1)", o-kw.prefetch[0])
	}
	kw.decode(a)
	bpStep, _ := kw.bpSteps()
	kw.tileGroups(a, 2)
	a.l("\tADDQ $%d, SI", kw.sb)
	a.code(fmt.Sprintf(`
ADDQ R12, DI
ADDQ $64, DX
ADDQ $%d, BX
DECQ CX`, bpStep))
	a.l("\tJNZ %sloop", lbl)
	a.l("\tTESTQ $2, mode+104(FP)")
	a.l("\tJNZ %sstore", lbl)
	a.code(`
VMOVUPS Z21, (R11)
VMOVUPS Z22, 64(R11)`)
	a.l("\tJMP %snext", lbl)
	a.l("%sstore:", lbl)
	a.code(`
MOVQ os+64(FP), DX
SHLQ $2, DX
MOVQ R10, AX`)
	for s := 0; s < 4; s++ {
		if s%2 == 0 {
			a.l("\tVMOVAPS Y%d, Y8", 21+s/2)
		} else {
			a.l("\tVEXTRACTF64X4 $1, Z%d, Y8", 21+s/2)
		}
		a.code(`
VEXTRACTF128 $1, Y8, X9
VADDPS X9, X8, X8`)
		for i := 0; i < 4; i++ {
			if i == 0 {
				a.l("\tVMOVSS X8, (AX)")
			} else {
				a.l("\tVEXTRACTPS $%d, X8, (AX)", i)
			}
			if s < 3 || i < 3 {
				a.l("\tADDQ DX, AX")
			}
		}
	}
	a.l("%snext:", lbl)
	a.code(`
ADDQ $128, R11
ADDQ $4, R10
ADDQ R13, R8
DECQ R9`)
	a.l("\tJNZ %srow", lbl)
	a.code(`
VZEROUPPER
RET`)
}

// q6kvDecls returns q6kv_amd64.go, the Go declarations of q6kv_amd64.s.
func q6kvDecls() string {
	return `//go:build amd64 && !purego

package cpu

// Code generated by asmgen; DO NOT EDIT.

// dotQ6KTx16KVS is dotQ4KTx16VNNI's tile (two groups of 8 activation
// rows, any number of weight rows, accumulators in registers) on Q6_K
// weight rows in the file's layout, the activations in actQ.kv's layout
// and bp their 16-value sums in actQ.b6's, over n of a reduction's nb
// super-blocks, the groups gs bytes apart in xt and its super-blocks ss
// apart. mode bit 0 starts each weight row from its accumulators in acc
// (32 floats per weight row) rather than from 0, bit 1 stores the
// results to out (os floats apart per activation row) rather than the
// accumulators to acc. Slices called in order, the first with bit 0
// clear and the last with bit 1 set, give dotQ6KTxNAVX2's results bit for
// bit. It needs AVX512_VNNI and AVX512_VBMI (hasK4V).
//
//go:noescape
func dotQ6KTx16KVS(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, acc *float32, gs int, ss int, n int, mode int)
`
}
