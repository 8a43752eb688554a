package asmgen

import "fmt"

// mxgMaxRows is the most activation rows of one mxgroup tile.
const mxgMaxRows = 8

// mxgroupFile writes mxgroup_amd64.s: MXFP4 tiles of one weight row
// against R (1 to 8) activation rows quantized in groups of blocks (one
// scale per group, see kernels/cpu/mxgroup.go for the layout and the
// numeric contract). A block's products stay integers across its group:
// VPMADDUBSW of the decoded block (doubled E2M1 value plus 12, as in
// mxfp4_amd64.s) with the activations, then VPMADDWD by the block's power
// of two 2^(e−emax+13) (0 for a block more than 13 binades below the
// group's largest) and VPADDD into the row's int32 sums: three vector ops
// per block and activation row, the block's decode and its scale shared
// by the R rows. At the end of a group the offset's correction
// (−12·2^k·Σx per block, one VPMADDWD against the activation rows'
// block sums) joins the sums, which are converted once and added, times
// the group's scale 2^(emax−141)·D, into the row's float sums.
func mxgroupFile() string {
	var a asm
	a.lines(generatedHeader)
	a.l(``)
	a.lines(`
// dotMXG{R}AVX2(p *mxgArgs): p.n weight rows (p.rb bytes apart, back to
// back) against R activation rows in mxgroup.go's layout; out[r·os + i]
// (os in bytes) is weight row i · activation row r. Registers: R15 p, SI
// the weight block, R9 rb, DI the activations of the block (row r at
// 32·r), R10 the group's block sums, R11 the group's scales, R12 the
// multiplier table, R13 the multipliers of the group being built, R8 the
// blocks left in the row, CX in the group, BX 255−emax; Y0..Y7 the rows'
// int32 sums, Y8 the decoded block, Y9 its multiplier, Y10 and Y15
// temporaries, Y11 the group's 2^(emax−141), Y12..Y14 as in
// mxfp4_amd64.s.`)
	for r := 1; r <= mxgMaxRows; r++ {
		a.l(``)
		a.mxgTile(r)
	}
	return a.b.String()
}

// The offsets of mxgArgs' fields (kernels/cpu/mxgroup.go).
const (
	mxgW   = 0
	mxgRb  = 8
	mxgXq  = 16
	mxgXbs = 24
	mxgCx  = 32
	mxgCgs = 40
	mxgD   = 48
	mxgDgs = 56
	mxgNb  = 64
	mxgN   = 72
	mxgOut = 80
	mxgOs  = 88
	mxgFa  = 96
	mxgMb  = 104
	mxgPw  = 112
	mxgF   = 120
	mxgG   = 128
)

// mxgTile writes dotMXG{R}AVX2.
func (a *asm) mxgTile(R int) {
	name := fmt.Sprintf("dotMXG%dAVX2", R)
	lbl := fmt.Sprintf("mxg%d", R)
	a.l(`// func %s(p *mxgArgs)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-8`, name)
	a.l("\tMOVQ p+0(FP), R15")
	a.l("\tMOVQ %d(R15), SI", mxgW)
	a.l("\tMOVQ %d(R15), R9", mxgRb)
	a.l("\tMOVQ %d(R15), R13", mxgMb)
	a.l("\tMOVQ %d(R15), R12", mxgPw)
	a.mxfp4Consts()
	a.l(`%srow:`, lbl)
	// the row's float sums (fa, 32 bytes a row) and int sums start at 0
	a.l("\tMOVQ %d(R15), AX", mxgFa)
	a.l("\tVXORPS Y10, Y10, Y10")
	for r := 0; r < R; r++ {
		a.l("\tVMOVUPS Y10, %d(AX)", 32*r)
		a.l("\tVPXOR Y%d, Y%d, Y%d", r, r, r)
	}
	a.l("\tMOVQ %d(R15), DI", mxgXq)
	a.l("\tMOVQ %d(R15), R10", mxgCx)
	a.l("\tMOVQ %d(R15), R11", mxgD)
	a.l("\tMOVQ %d(R15), R8", mxgNb)
	a.l(`%sgroup:`, lbl)
	// CX = min(G, blocks left); emax = the largest scale byte of them
	a.l("\tMOVQ %d(R15), CX", mxgG)
	a.code(`
CMPQ R8, CX
CMOVQLT R8, CX
SUBQ CX, R8
XORL DX, DX
MOVQ SI, BX
MOVQ CX, R14`)
	a.l(`%semax:`, lbl)
	a.code(`
MOVBLZX (BX), AX
CMPQ AX, DX
CMOVQGT AX, DX
ADDQ $17, BX
DECQ R14`)
	a.l("\tJNZ %semax", lbl)
	// BX = 255 − emax (a block's multiplier is pw[e + BX]); Y11 the
	// group's factor 2^(emax−141); the multipliers' buffer cleared
	a.l("\tMOVQ %d(R15), AX", mxgF)
	a.code(`
VBROADCASTSS (AX)(DX*4), Y11
MOVQ $255, BX
SUBQ DX, BX
VPXOR Y10, Y10, Y10
VMOVDQU Y10, (R13)
MOVQ R13, R14`)
	a.l(`%sblk:`, lbl)
	a.code(`
MOVBLZX (SI), AX
ADDQ BX, AX
VPBROADCASTW (R12)(AX*2), Y9
MOVWLZX (R12)(AX*2), AX
MOVW AX, (R14)
ADDQ $2, R14
PREFETCHT0 (SI)(R9*1)
VBROADCASTI128 1(SI), Y8
VPSRLVD Y12, Y8, Y8
VPAND Y14, Y8, Y8
VPSHUFB Y8, Y13, Y8`)
	for r := 0; r < R; r++ {
		a.l("\tVPMADDUBSW %d(DI), Y8, Y10", 32*r)
		a.l("\tVPMADDWD Y9, Y10, Y10")
		a.l("\tVPADDD Y10, Y%d, Y%d", r, r)
	}
	a.l("\tADDQ $17, SI")
	a.l("\tADDQ %d(R15), DI", mxgXbs)
	a.l("\tDECQ CX")
	a.l("\tJNZ %sblk", lbl)
	// the group's end: the corrections (the multipliers doubled, against
	// −6·Σx per block), then the float sums
	a.code(`
VMOVDQU (R13), Y9
VPADDW Y9, Y9, Y9`)
	a.l("\tMOVQ %d(R15), AX", mxgFa)
	for r := 0; r < R; r++ {
		a.l("\tVPMADDWD %d(R10), Y9, Y10", 32*r)
		a.l("\tVPADDD Y10, Y%d, Y%d", r, r)
		a.l("\tVCVTDQ2PS Y%d, Y%d", r, r)
		a.l("\tVBROADCASTSS %d(R11), Y10", 4*r)
		a.l("\tVMULPS Y11, Y10, Y10")
		a.l("\tVMOVUPS %d(AX), Y15", 32*r)
		a.l("\tVFMADD231PS Y%d, Y10, Y15", r)
		a.l("\tVMOVUPS Y15, %d(AX)", 32*r)
		a.l("\tVPXOR Y%d, Y%d, Y%d", r, r, r)
	}
	a.l("\tADDQ %d(R15), R10", mxgCgs)
	a.l("\tADDQ %d(R15), R11", mxgDgs)
	a.l("\tTESTQ R8, R8")
	a.l("\tJNZ %sgroup", lbl)
	// the row's end: each activation row's 8 float sums added up
	a.l("\tMOVQ %d(R15), DX", mxgOut)
	a.l("\tMOVQ %d(R15), R14", mxgOs)
	for r := 0; r < R; r++ {
		a.l("\tVMOVUPS %d(AX), Y10", 32*r)
		a.code(`
VEXTRACTF128 $1, Y10, X15
VADDPS X15, X10, X10
VHADDPS X10, X10, X10
VHADDPS X10, X10, X10
VMOVSS X10, (DX)`)
		if r < R-1 {
			a.l("\tADDQ R14, DX")
		}
	}
	a.l("\tADDQ $4, %d(R15)", mxgOut)
	a.l("\tDECQ %d(R15)", mxgN)
	a.l("\tJNZ %srow", lbl)
	a.code(`
VZEROUPPER
RET`)
}

// mxgroupDecls writes mxgroup_amd64.go: the Go declarations of
// mxgroup_amd64.s.
func mxgroupDecls() string {
	var a asm
	a.lines(`//go:build amd64 && !purego

// Code generated by asmgen; DO NOT EDIT.

package cpu

// The MXFP4 group tiles of mxgroup_amd64.s.`)
	for r := 1; r <= mxgMaxRows; r++ {
		a.l(``)
		a.l(`//go:noescape`)
		a.l(`func dotMXG%dAVX2(p *mxgArgs)`, r)
	}
	return a.b.String()
}
