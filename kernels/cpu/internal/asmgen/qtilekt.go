package asmgen

import "fmt"

// qtilektFile writes qtilekt_amd64.s: the Q4_K tiles on transposed
// super-blocks (see kernels/cpu/qtilekt.go).
func qtilektFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q4_K tiles on transposed super-blocks (see qtilekt.go): each weight
// super-block's 256 nibbles are decoded into eight vectors, one per
// sub-block, and transposed as 8×8 words per 128-bit lane, so that word w
// of every vector belongs to sub-block w. The activation rows come in the
// same order (actQ.kt), so the eight VPMADDUBSW products of a row and
// super-block add as words (exact: |sum| ≤ 8·2·15·128 < 2^15) and one
// VPMADDWD applies the eight sub-block scales. Each 128-bit lane keeps
// values 0-15 or 16-31 of every sub-block, as in dotQ4Kx8PAVX2, so the
// lanes' integer sums are the same and the fold (HADD4, mins from actQ.bp,
// d and dmin, float accumulation) is dotQ4Kx8PAVX2's: the results equal it
// bit for bit.`)
	a.l(``)
	a.l("%s", macrosTile8)
	a.kxt(1)
	a.kxt(2)
	return a.b.String()
}

// kxt writes dotQ4KTx8AVX2 (groups 1) or dotQ4KTx16AVX2 (groups 2): the
// products of rows Q4_K weight rows (rb bytes apart) with 8·groups
// activation rows, stored into out (os floats apart per activation row,
// one float per weight row). Frame: KSCALES8's scales at 0(SP) and mins at
// 32(SP), d and dmin at 64(SP), the float accumulators of each 4 rows at
// 96(SP)+32·s. Registers: SI the weight super-block, R8 the weight row,
// R9 the rows left, R10 the output column, CX the super-blocks left, DI
// the transposed activations (2 KiB per group of 8 rows and super-block,
// groups R14 = 2048·nb bytes apart), DX and BX the groups' activation
// scales (xd8) and 32-value sums (bp), groups R15 = 64·nb and 2·R15 bytes
// apart. Y8-Y15 hold the transposed super-block, Y7 the scales as words.
func (a *asm) kxt(groups int) {
	name := a.k4Name(fmt.Sprintf("dotQ4KTx%d", 8*groups))
	lbl := fmt.Sprintf("q4kt%d", 8*groups)
	a.l(``)
	a.l(`// func %s(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $%d-72`, name, 96+32*2*groups)
	a.code(`
MOVQ w+0(FP), R8
MOVQ rows+16(FP), R9
MOVQ out+56(FP), R10
MOVQ nb+48(FP), R15
MOVQ R15, R14
SHLQ $11, R14
SHLQ $6, R15`)
	a.l("%srow:", lbl)
	a.code(`
MOVQ R8, SI
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ bp+40(FP), BX
MOVQ nb+48(FP), CX
VXORPS Y0, Y0, Y0`)
	for s := 0; s < 2*groups; s++ {
		a.l("\tVMOVUPS Y0, %d(SP)", 96+32*s)
	}
	a.l("%sloop:", lbl)
	if groups == 2 {
		// the weight stream, 4 super-blocks ahead (on into the block's
		// next rows): at 16 rows the 8192×2048 products gained ≈ 5 %
		// (docs/bench/batch-tiles.md)
		a.code(`
PREFETCHT0 576(SI)
PREFETCHT0 640(SI)
PREFETCHT0 704(SI)`)
	}
	a.kxtDecode()
	for s := 0; s < 2*groups; s++ {
		g, half := s/2, s%2
		act := func(r, v int) string {
			o := (4*half+r)*256 + 32*v
			if g == 0 {
				return fmt.Sprintf("%d(DI)", o)
			}
			return fmt.Sprintf("%d(DI)(R14*1)", o)
		}
		grp := func(off int, base string, scale int) string {
			if g == 0 {
				return fmt.Sprintf("%d(%s)", off, base)
			}
			return fmt.Sprintf("%d(%s)(R15*%d)", off, base, scale)
		}
		a.kxtHalf(act, grp(64*half, "BX", 2), grp(64*half+32, "BX", 2), grp(32*half, "DX", 1), fmt.Sprintf("%d(SP)", 96+32*s))
	}
	a.code(`
ADDQ $144, SI
ADDQ $2048, DI
ADDQ $64, DX
ADDQ $128, BX
DECQ CX`)
	a.l("\tJNZ %sloop", lbl)
	a.code(`
MOVQ os+64(FP), DX
SHLQ $2, DX
MOVQ R10, AX`)
	// each 4 rows' two halves summed as OUT8 does, then stored one row
	// at a time, os floats apart
	for s := 0; s < 2*groups; s++ {
		a.code(fmt.Sprintf(`
VMOVUPS %d(SP), Y8
VEXTRACTF128 $1, Y8, X9
VADDPS X9, X8, X8`, 96+32*s))
		for i := 0; i < 4; i++ {
			if i == 0 {
				a.l("\tVMOVSS X8, (AX)")
			} else {
				a.l("\tVEXTRACTPS $%d, X8, (AX)", i)
			}
			if s < 2*groups-1 || i < 3 {
				a.l("\tADDQ DX, AX")
			}
		}
	}
	a.code(`
ADDQ $4, R10
ADDQ rb+8(FP), R8
DECQ R9`)
	a.l("\tJNZ %srow", lbl)
	a.code(`
VZEROUPPER
RET`)
}

// kxtDecode writes the head of a transposed tile's super-block (SI): the
// scales and mins by KSCALES8 (at 0(SP) and 32(SP)), d and dmin at 64(SP),
// the 8 sub-blocks' nibbles transposed as 8×8 words per 128-bit lane into
// Y8-Y15, and the scales as words in both lanes of Y7.
func (a *asm) kxtDecode() {
	// scales and mins (KSCALES8 needs 0x0f bytes in X14), d and dmin,
	// the 4 groups' nibbles as sub-blocks 0-7 in Y0-Y7
	a.code(`
VMOVDQU t8mask0f<>(SB), Y14
KSCALES8
MOVL (SI), AX
VMOVD AX, X0
VCVTPH2PS X0, X0
VMOVQ X0, 64(SP)`)
	for g := 0; g < 4; g++ {
		a.code(fmt.Sprintf(`
VMOVDQU %d(SI), Y%d
VPSRLW $4, Y%d, Y%d
VPAND Y14, Y%d, Y%d
VPAND Y14, Y%d, Y%d`, 16+32*g, 2*g, 2*g, 2*g+1, 2*g, 2*g, 2*g+1, 2*g+1))
	}
	if a.k4rp {
		a.transposeD4x2()
	} else {
		a.transposeW8()
	}
	a.l("\tVBROADCASTI128 0(SP), Y7")
}

// transposeW8 transposes Y0-Y7 as 8×8 words per 128-bit lane into
// Y8-Y15: word w of Y(8+v) is word v of Yw (lane by lane). Clobbers Y0-Y7.
func (a *asm) transposeW8() {
	// words, dwords, qwords (Y8-Y15, Y0-Y7, Y8-Y15)
	for i := 0; i < 4; i++ {
		a.l("\tVPUNPCKLWD Y%d, Y%d, Y%d", 2*i+1, 2*i, 8+2*i)
		a.l("\tVPUNPCKHWD Y%d, Y%d, Y%d", 2*i+1, 2*i, 9+2*i)
	}
	for _, p := range [][3]int{{8, 10, 0}, {9, 11, 2}, {12, 14, 4}, {13, 15, 6}} {
		a.l("\tVPUNPCKLDQ Y%d, Y%d, Y%d", p[1], p[0], p[2])
		a.l("\tVPUNPCKHDQ Y%d, Y%d, Y%d", p[1], p[0], p[2]+1)
	}
	for i := 0; i < 4; i++ {
		a.l("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", 4+i, i, 8+2*i)
		a.l("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", 4+i, i, 9+2*i)
	}
}

// kxtHalf writes the products of 4 activation rows (act(r, v): row r's
// 32-byte chunk v) with the transposed super-block in Y8-Y15 and their
// fold into the float accumulator at acc: the rows' word sums, one
// VPMADDWD by the scales (Y7), HADD4, the mins from the 32-value sums at
// bp0 and bp1 (the mins at 32(SP)), d·xd and dmin·xd from d, dmin at
// 64(SP) and the rows' activation scales at xd. Clobbers Y0-Y6.
func (a *asm) kxtHalf(act func(r, v int) string, bp0, bp1, xd, acc string) {
	for r := 0; r < 4; r++ {
		a.l("\tVPMADDUBSW %s, Y8, Y%d", act(r, 0), r)
		for v := 1; v < 8; v++ {
			t := 4 + v%3
			a.l("\tVPMADDUBSW %s, Y%d, Y%d", act(r, v), 8+v, t)
			a.l("\tVPADDW Y%d, Y%d, Y%d", t, r, r)
		}
		a.l("\tVPMADDWD Y7, Y%d, Y%d", r, r)
	}
	a.code(fmt.Sprintf(`
HADD4(Y0, Y1, Y2, Y3)
VCVTDQ2PS Y0, Y0
VMOVDQU 32(SP), Y1
VPMADDWD %s, Y1, Y2
VPMADDWD %s, Y1, Y3
VPHADDD Y3, Y2, Y2
VCVTDQ2PS Y2, Y2
VBROADCASTSS 64(SP), Y4
VBROADCASTSS 68(SP), Y5
VMULPS %s, Y4, Y4
VMULPS %s, Y5, Y5
VMOVUPS %s, Y6
VFMADD231PS Y0, Y4, Y6
VFNMADD231PS Y2, Y5, Y6
VMOVUPS Y6, %s`, bp0, bp1, xd, xd, acc, acc))
}
