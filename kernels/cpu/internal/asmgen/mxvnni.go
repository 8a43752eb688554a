package asmgen

import "fmt"

// mxvnniShapes are the (pairs of weight rows, activation rows) of the
// AVX-512 VNNI MXFP4 kernels: two pairs against one activation row (the
// batch-1 row loop) and one pair against 2 to 4 rows (the tiles of
// batched decode).
var mxvnniShapes = [][2]int{{2, 1}, {1, 2}, {1, 3}, {1, 4}}

// mxvnniFile writes mxvnni_amd64.s: the AVX-512 VNNI twins of the MXFP4
// row loop and tiles of mxfp4_amd64.s and mxtile_amd64.s, bit for bit the
// same results (see kernels/cpu/mxvnni.go).
//
// A Z register holds one block of two weight rows: 128-bit lanes 0 and 1
// the first row's 16 nibble bytes (VBROADCASTI32X4), lanes 2 and 3 the
// second's (the same broadcast under mask K1 = the upper 8 dwords);
// VPSRLVD by 0/4/0/4 and VPANDD keep the codes in element order, and
// VPSHUFB maps them to the doubled E2M1 value plus 12 (unsigned, in [0,
// 24]). One VPDPBUSD multiplies both rows' 32 codes with the activation
// block (broadcast to both halves) and adds each group of four products
// to its dword, starting from the activation block's corrections
// −12·(x[4i]+…+x[4i+3]) (int32, made once per MatMul): the dwords are
// exactly the AVX2 kernels' partial sums (VPMADDUBSW's pairs, which cannot
// saturate here, plus the pair corrections, added in pairs by VPMADDWD),
// as integers. VCVTDQ2PS then gives the same 8 floats per row, one
// VMULPS makes both rows' scale products (the pair's two E8M0 factors,
// one per half, times the activation block's scale: the float32 products
// the AVX2 kernels make or hold in their tables) and one VFMADD231PS adds
// the products times them into the accumulator whose halves are the two
// rows' accumulators, blocks in order. No scale tables are needed. The sums
// are reduced as hsum4Store reduces them. So every float operation of a
// weight row and activation row is the AVX2 kernels', in the same order.
func mxvnniFile() string {
	var a asm
	a.lines(generatedHeader)
	a.l(``)
	a.lines(`
// dotMXFP4Z{P}x{R}VNNI: n groups of 2·P weight rows (rows rb bytes apart)
// against R activation rows (xs bytes of activations and of int32
// corrections apart, their block scales xds bytes apart; tab is
// e8m0Half); out[r·os + i] is weight row i · activation row r (with R = 1
// the groups' 4 results side by side). Constants: Z12 the dword shift counts
// 0/4/0/4 by 128-bit lane, Z13 the doubled E2M1 values plus 12 in every
// lane, Z14 bytes 0x0f; K1 the upper 8 dwords.`)
	for _, s := range mxvnniShapes {
		a.l(``)
		a.mxvnniTile(s[0], s[1])
	}
	a.l(``)
	a.mxCorr(false)
	a.l(``)
	a.mxCorr(true)
	return a.b.String()
}

// mxCorr writes mxfp4CorrAVX2 (quad false) and mxfp4Corr4AVX2 (quad
// true): the MXFP4 kernels' activation corrections of n int8 values (n a
// multiple of 32), 32 at a time: VPMADDUBSW by bytes of 1 adds each pair
// (no saturation: |x0+x1| ≤ 256), VPMULLW by −12 gives the pair
// corrections c16 (|·| ≤ 3072), and with quad VPMADDWD by words of 1 adds
// them in pairs into the quad corrections c32. Integers, so the same
// values as the Go loops.
func (a *asm) mxCorr(quad bool) {
	name, args, frame := "mxfp4CorrAVX2", "q *int8, n int, c16 *int16", 24
	if quad {
		name, args, frame = "mxfp4Corr4AVX2", "q *int8, n int, c16 *int16, c32 *int32", 32
	}
	a.l(`// func %s(%s)`, name, args)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-%d`, name, frame)
	a.code(`
MOVQ q+0(FP), SI
MOVQ n+8(FP), CX
MOVQ c16+16(FP), DI
SHRQ $5, CX
JZ mxcorrdone
MOVL $0x01010101, AX
VMOVD AX, X15
VPBROADCASTD X15, Y15
MOVL $0xfff4fff4, AX
VMOVD AX, X14
VPBROADCASTD X14, Y14
VPCMPEQW Y13, Y13, Y13
VPSRLW $15, Y13, Y13`)
	if quad {
		a.l("\tMOVQ c32+24(FP), R8")
	}
	a.code(`
mxcorrloop:
VMOVDQU (SI), Y0
VPMADDUBSW Y0, Y15, Y1
VPMULLW Y14, Y1, Y1
VMOVDQU Y1, (DI)`)
	if quad {
		a.code(`
VPMADDWD Y13, Y1, Y2
VMOVDQU Y2, (R8)
ADDQ $32, R8`)
	}
	a.code(`
ADDQ $32, SI
ADDQ $32, DI
DECQ CX
JNZ mxcorrloop
VZEROUPPER
mxcorrdone:
RET`)
}

// mxvnniConsts loads Z12-Z14 and K1 (clobbers AX, Y11, Y15).
func (a *asm) mxvnniConsts() {
	a.mxfp4Consts()
	a.code(`
VINSERTI64X4 $1, Y12, Z12, Z12
VINSERTI64X4 $1, Y13, Z13, Z13
VINSERTI64X4 $1, Y14, Z14, Z14
MOVL $0xff00, AX
KMOVW AX, K1`)
}

// mxvnniTile writes dotMXFP4Z{P}x{R}VNNI. Registers: SI the group's first
// weight row, R10 rb (R11 3·rb with two pairs), DI/BX the activations and
// corrections of row 0 (R11 xs, R14 3·xs), R8 activation row 0's block
// scale (R12 xds, R13 3·xds), R15 the prefetch pointer into the next
// group's rows, DX tab (out lives in its argument slot, advanced there),
// CX the blocks left, AX/R9 a pair's two scale bytes; Z0..Z3 the
// accumulators (pair p, activation row r: Z(p·R + r)), Z4 the decoded
// pair, Z5/Z8 the activations, Z6/Z9 the products, Z7/Z10 the scale
// products, Z11 the pair's two tab entries (one per half).
func (a *asm) mxvnniTile(P, R int) {
	name := fmt.Sprintf("dotMXFP4Z%dx%dVNNI", P, R)
	a.l(`// func %s(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-96`, name)
	a.code(`
MOVQ w+0(FP), SI
MOVQ rb+8(FP), R10
MOVQ tab+56(FP), DX`)
	if P == 2 {
		a.l("\tLEAQ (R10)(R10*2), R11")
	} else {
		a.code(`
MOVQ xs+32(FP), R11
LEAQ (R11)(R11*2), R14
MOVQ xds+48(FP), R12
LEAQ (R12)(R12*2), R13`)
	}
	a.mxvnniConsts()
	lbl := fmt.Sprintf("mxz%dx%d", P, R)
	a.l(`%sgroup:`, lbl)
	a.code(`
MOVQ xq+16(FP), DI
MOVQ c+24(FP), BX
MOVQ xd+40(FP), R8
MOVQ nb+64(FP), CX`)
	a.l("\tLEAQ (SI)(R10*%d), R15", 2*P)
	for i := 0; i < P*R; i++ {
		a.l("\tVXORPS Z%d, Z%d, Z%d", i, i, i)
	}
	a.l(`%sloop:`, lbl)
	// one prefetch per block walks the next group's rows (17·2P bytes
	// per block), so that they are in cache when it starts
	a.l("\tPREFETCHT0 (R15)")
	a.l("\tADDQ $%d, R15", 17*2*P)
	xm := []string{"(DI)", "(DI)(R11*1)", "(DI)(R11*2)", "(DI)(R14*1)"}
	cm := []string{"(BX)", "(BX)(R11*1)", "(BX)(R11*2)", "(BX)(R14*1)"}
	dm := []string{"(R8)", "(R8)(R12*1)", "(R8)(R12*2)", "(R8)(R13*1)"}
	wm := []string{"(SI)", "(SI)(R10*1)", "(SI)(R10*2)", "(SI)(R11*1)"}
	if R == 1 {
		a.l("\tVBROADCASTI64X4 (DI), Z5")
	}
	for p := 0; p < P; p++ {
		w0, w1 := wm[2*p], wm[2*p+1]
		a.l("\tMOVBLZX %s, AX", w0)
		a.l("\tMOVBLZX %s, R9", w1)
		a.l("\tVBROADCASTSS (DX)(AX*4), Z11")
		a.l("\tVBROADCASTSS (DX)(R9*4), K1, Z11")
		a.l("\tVBROADCASTI32X4 1%s, Z4", w0)
		a.l("\tVBROADCASTI32X4 1%s, K1, Z4", w1)
		a.l("\tVPSRLVD Z12, Z4, Z4")
		a.l("\tVPANDD Z14, Z4, Z4")
		a.l("\tVPSHUFB Z4, Z13, Z4")
		for r := 0; r < R; r++ {
			x, q, s := 5, 6, 7
			if (p+r)%2 == 1 {
				x, q, s = 8, 9, 10
			}
			if R == 1 {
				x = 5
			} else {
				a.l("\tVBROADCASTI64X4 %s, Z%d", xm[r], x)
			}
			a.l("\tVBROADCASTI64X4 %s, Z%d", cm[r], q)
			a.l("\tVPDPBUSD Z%d, Z4, Z%d", x, q)
			a.l("\tVCVTDQ2PS Z%d, Z%d", q, q)
			a.l("\tVMULPS.BCST %s, Z11, Z%d", dm[r], s)
			a.l("\tVFMADD231PS Z%d, Z%d, Z%d", q, s, p*R+r)
		}
	}
	a.code(`
ADDQ $17, SI
ADDQ $32, DI
ADDQ $32, BX
ADDQ $4, R8
DECQ CX`)
	a.l("\tJNZ %sloop", lbl)
	// SI is at the group's second row: step to the next group
	if P == 2 {
		a.l("\tADDQ R11, SI")
	} else {
		a.l("\tADDQ R10, SI")
	}
	// the upper halves (the pairs' second rows) to Z8.., then the sums
	// reduced as hsum4Store reduces them
	for i := 0; i < P*R; i++ {
		a.l("\tVEXTRACTF64X4 $1, Z%d, Y%d", i, 8+i)
	}
	a.l("\tMOVQ out+80(FP), DX")
	if R == 1 {
		// weight rows 0..3: Y0, Y8, Y1, Y9
		a.code(`
VHADDPS Y8, Y0, Y0
VHADDPS Y9, Y1, Y1
VHADDPS Y1, Y0, Y0
VEXTRACTF128 $1, Y0, X1
VADDPS X1, X0, X0
VMOVUPS X0, (DX)
ADDQ $16, DX`)
	} else {
		a.code(`
MOVQ os+88(FP), R9
SHLQ $2, R9
LEAQ (R9)(R9*2), AX`)
		for h := 0; h < 2; h++ {
			// activation rows 0..3 of weight row h in Y4..Y7 (zeros past R)
			for r := 0; r < 4; r++ {
				switch {
				case r >= R:
					a.l("\tVXORPS Y%d, Y%d, Y%d", 4+r, 4+r, 4+r)
				case h == 0:
					a.l("\tVMOVAPS Y%d, Y%d", r, 4+r)
				default:
					a.l("\tVMOVAPS Y%d, Y%d", 8+r, 4+r)
				}
			}
			a.code(`
VHADDPS Y5, Y4, Y4
VHADDPS Y7, Y6, Y6
VHADDPS Y6, Y4, Y4
VEXTRACTF128 $1, Y4, X5
VADDPS X5, X4, X4`)
			d := ""
			if h == 1 {
				d = "4"
			}
			a.l("\tVMOVSS X4, %s(DX)", d)
			for r, m := range []string{"(R9*1)", "(R9*2)", "(AX*1)"}[:R-1] {
				a.l("\tVEXTRACTPS $%d, X4, %s(DX)%s", r+1, d, m)
			}
		}
		a.l("\tADDQ $8, DX")
	}
	a.code(`
MOVQ DX, out+80(FP)
MOVQ tab+56(FP), DX
DECQ n+72(FP)`)
	a.l("\tJNZ %sgroup", lbl)
	a.code(`
VZEROUPPER
RET`)
}

// mxvnniDecls writes mxvnni_amd64.go: the Go declarations of
// mxvnni_amd64.s.
func mxvnniDecls() string {
	var a asm
	a.lines(`//go:build amd64 && !purego

// Code generated by asmgen; DO NOT EDIT.

package cpu

// The AVX-512 VNNI MXFP4 kernels of mxvnni_amd64.s.`)
	for _, s := range mxvnniShapes {
		a.l(``)
		a.l(`//go:noescape`)
		a.l(`func dotMXFP4Z%dx%dVNNI(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int)`, s[0], s[1])
	}
	a.l(``)
	a.lines(`
//go:noescape
func mxfp4CorrAVX2(q *int8, n int, c16 *int16)

//go:noescape
func mxfp4Corr4AVX2(q *int8, n int, c16 *int16, c32 *int32)`)
	return a.b.String()
}
