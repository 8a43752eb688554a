package asmgen

import "fmt"

// vecISA names the vector width the exp loops are written for: AVX-512
// (zmm, exp_amd64.s) or AVX2 (ymm, attn2_amd64.s). The loops' structure is
// the same; registers, widths and the exp sequence differ.
type vecISA struct {
	sfx   string // function name suffix
	r     string // vector register prefix
	lbl   string // label suffix
	bytes int    // bytes per vector
	lanes int    // float32 lanes per vector
	// sub and acc are the registers of the loop's broadcast operand and its
	// accumulator, one the register holding 1.0.
	sub, acc, one int
	zero          string // instruction that clears a vector
	consts        func(a *asm)
	exp           func(a *asm, x, t1, t2 string)
}

var (
	isa512 = vecISA{sfx: "AVX512", r: "Z", bytes: 64, lanes: 16, sub: 26, acc: 27, one: 25, zero: "VPXORD",
		consts: (*asm).expConsts, exp: (*asm).exp}
	isa2 = vecISA{sfx: "AVX2", r: "Y", lbl: "2", bytes: 32, lanes: 8, sub: 4, acc: 5, one: 15, zero: "VXORPS",
		consts: (*asm).expConsts2, exp: (*asm).exp2}
)

// v names vector register n.
func (v vecISA) v(n int) string { return fmt.Sprintf("%s%d", v.r, n) }

// bcast fills vector register n with the 32-bit constant c (through AX).
func (v vecISA) bcast(c uint32, n int) string {
	if v.r == "Z" {
		return fmt.Sprintf("MOVL $0x%08x, AX\nVPBROADCASTD AX, Z%d", c, n)
	}
	return fmt.Sprintf("MOVL $0x%08x, AX\nVMOVD AX, X%d\nVPBROADCASTD X%d, Y%d", c, n, n, n)
}

// fold reduces the lanes of vector acc with op down to the four of X1.
func (v vecISA) fold(op string, acc int) string {
	if v.r == "Z" {
		return fmt.Sprintf("VEXTRACTF64X4 $1, Z%d, Y1\n%s Y1, Y%d, Y1\nVEXTRACTF128 $1, Y1, X2\n%s X2, X1, X1", acc, op, acc, op)
	}
	return fmt.Sprintf("VEXTRACTF128 $1, Y%d, X2\n%s X2, X%d, X1", acc, op, acc)
}

// expLoops writes expSubSum, siluMul and scaleMax for one vector width.
func (a *asm) expLoops(v vecISA) {
	a.lines(fmt.Sprintf(`
// func expSubSum%s(x *float32, n int, sub float32) float32
// x[i] = exp(x[i] - sub); returns the sum of the new x.`, v.sfx))
	a.l(`TEXT ·expSubSum%s(SB), NOSPLIT, $0-28`, v.sfx)
	a.code(fmt.Sprintf(`
MOVQ x+0(FP), SI
MOVQ n+8(FP), CX
VBROADCASTSS sub+16(FP), %s`, v.v(v.sub)))
	v.consts(a)
	a.code(fmt.Sprintf(`
%[1]s %[2]s, %[2]s, %[2]s
TESTQ CX, CX
JEQ sumdone%[3]s
sumloop%[3]s:
VMOVUPS (SI), %[4]s
VSUBPS %[5]s, %[4]s, %[4]s`, v.zero, v.v(v.acc), v.lbl, v.v(0), v.v(v.sub)))
	v.exp(a, v.v(0), v.v(1), v.v(2))
	a.code(fmt.Sprintf(`
VMOVUPS %[1]s, (SI)
VADDPS %[1]s, %[2]s, %[2]s
ADDQ $%[3]d, SI
SUBQ $%[4]d, CX
JNZ sumloop%[5]s
sumdone%[5]s:
%[6]s
VHADDPS X1, X1, X1
VHADDPS X1, X1, X1
VMOVSS X1, ret+24(FP)
VZEROUPPER
RET`, v.v(0), v.v(v.acc), v.bytes, v.lanes, v.lbl, v.fold("VADDPS", v.acc)))
	a.l(``)
	a.lines(fmt.Sprintf(`
// func siluMul%s(dst, gate, up *float32, n int)
// dst[i] = gate[i] / (1 + exp(-gate[i])) * up[i] (dst may alias either).`, v.sfx))
	a.l(`TEXT ·siluMul%s(SB), NOSPLIT, $0-32`, v.sfx)
	a.code(`
MOVQ dst+0(FP), DI
MOVQ gate+8(FP), SI
MOVQ up+16(FP), DX
MOVQ n+24(FP), CX`)
	v.consts(a)
	a.code(fmt.Sprintf(`
TESTQ CX, CX
JEQ silud%[1]s
siluloop%[1]s:
VMOVUPS (SI), %[3]s
VXORPS %[2]s, %[2]s, %[2]s
VSUBPS %[3]s, %[2]s, %[2]s`, v.lbl, v.v(0), v.v(3)))
	v.exp(a, v.v(0), v.v(1), v.v(2))
	a.code(fmt.Sprintf(`
VADDPS %[2]s, %[1]s, %[1]s
VDIVPS %[1]s, %[3]s, %[3]s
VMULPS (DX), %[3]s, %[3]s
VMOVUPS %[3]s, (DI)
ADDQ $%[4]d, SI
ADDQ $%[4]d, DI
ADDQ $%[4]d, DX
SUBQ $%[5]d, CX
JNZ siluloop%[6]s
silud%[6]s:
VZEROUPPER
RET`, v.v(0), v.v(v.one), v.v(3), v.bytes, v.lanes, v.lbl))
	a.l(``)
	a.lines(fmt.Sprintf(`
// func scaleMax%s(x *float32, n int, scale float32) float32
// x[i] *= scale; returns the max of the new x (-Inf when n is 0).`, v.sfx))
	a.l(`TEXT ·scaleMax%s(SB), NOSPLIT, $0-28`, v.sfx)
	a.code(fmt.Sprintf(`
MOVQ x+0(FP), SI
MOVQ n+8(FP), CX
VBROADCASTSS scale+16(FP), %[1]s
%[2]s
TESTQ CX, CX
JEQ maxdone%[3]s
maxloop%[3]s:
VMULPS (SI), %[1]s, %[4]s
VMOVUPS %[4]s, (SI)
VMAXPS %[4]s, %[5]s, %[5]s
ADDQ $%[6]d, SI
SUBQ $%[7]d, CX
JNZ maxloop%[3]s
maxdone%[3]s:
%[8]s
VPERMILPS $0x4e, X1, X2
VMAXPS X2, X1, X1
VPERMILPS $0xb1, X1, X2
VMAXPS X2, X1, X1
VMOVSS X1, ret+24(FP)
VZEROUPPER
RET`, v.v(v.sub), v.bcast(0xff800000, v.acc), v.lbl, v.v(0), v.v(v.acc), v.bytes, v.lanes, v.fold("VMAXPS", v.acc)))
}

// scaleMul512 writes scaleMulAVX512, RMSNorm's last step.
func (a *asm) scaleMul512() {
	a.lines(`
// func scaleMulAVX512(dst, x, w *float32, n int, s float32)
// dst[i] = (x[i]*s)*w[i] for i < n (a multiple of 16): RMSNorm's last
// step, the same two float32 products per value as the scalar loop.`)
	a.l(`TEXT ·scaleMulAVX512(SB), NOSPLIT, $0-36`)
	a.code(`
MOVQ dst+0(FP), DI
MOVQ x+8(FP), SI
MOVQ w+16(FP), DX
MOVQ n+24(FP), CX
VBROADCASTSS s+32(FP), Z26
TESTQ CX, CX
JEQ smuldone
smulloop:
VMULPS (SI), Z26, Z0
VMULPS (DX), Z0, Z0
VMOVUPS Z0, (DI)
ADDQ $64, SI
ADDQ $64, DX
ADDQ $64, DI
SUBQ $16, CX
JNZ smulloop
smuldone:
VZEROUPPER
RET`)
}
