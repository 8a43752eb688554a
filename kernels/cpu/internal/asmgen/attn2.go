package asmgen

import "fmt"

// attn2 writes attn2_amd64.s: the AVX2 (ymm, FMA, F16C) kernels of the
// attention and norm path for CPUs without AVX-512, over float32 or
// float16 caches: key scores, the weighted sum of values, the float16
// conversion of new keys and values, a float32 dot product, and the
// softmax and SiLU loops on a vector exp.
func attn2() string {
	var a asm
	a.header()
	a.lines(`
// AVX2 attention kernels (see kern.go and kv16.go): the twins of the
// AVX-512 ones for CPUs that have only AVX2, FMA and F16C. Lengths are
// multiples of 8 (of 32 or 64 for the weighted sums); callers handle tails.`)
	a.l(``)
	a.lines(`
// func f32ToF16AVX2(dst *uint16, src *float32, n int)
// dst[i] = float16(src[i]), rounding to nearest even; n a multiple of 8.`)
	a.l(`TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24`)
	a.code(`
MOVQ dst+0(FP), DI
MOVQ src+8(FP), SI
MOVQ n+16(FP), CX
TESTQ CX, CX
JEQ cvt2done
cvt2loop:
VMOVUPS (SI), Y0
VCVTPS2PH $0, Y0, X1
VMOVDQU X1, (DI)
ADDQ $32, SI
ADDQ $16, DI
SUBQ $8, CX
JNZ cvt2loop
cvt2done:
VZEROUPPER
RET`)
	a.l(``)
	a.dot2()
	a.l(``)
	a.lines(fmt.Sprintf(`
DATA exphi2<>+0(SB)/8, $0x%[1]s%[1]s
DATA exphi2<>+8(SB)/8, $0x%[1]s%[1]s
DATA exphi2<>+16(SB)/8, $0x%[1]s%[1]s
DATA exphi2<>+24(SB)/8, $0x%[1]s%[1]s
GLOBL exphi2<>(SB), RODATA|NOPTR, $32
DATA explo2<>+0(SB)/8, $0x%[2]s%[2]s
DATA explo2<>+8(SB)/8, $0x%[2]s%[2]s
DATA explo2<>+16(SB)/8, $0x%[2]s%[2]s
DATA explo2<>+24(SB)/8, $0x%[2]s%[2]s
GLOBL explo2<>(SB), RODATA|NOPTR, $32`, bits(88.0)[2:], bits(-87.3)[2:]))
	a.l(``)
	a.expLoops(isa2)
	for _, half := range []bool{false, true} {
		for _, r := range []int{4, 1} {
			a.l(``)
			a.scores2(half, r)
		}
		for _, c := range []int{64, 32} {
			a.l(``)
			a.wsum2(half, c)
		}
	}
	return a.b.String()
}

// kvLoad2 returns the assembly that makes ymm reg hold 8 cache elements at
// addr (with half, widened from float16 into tmp) and the operand an FMA
// takes for them: the memory operand itself for float32.
func kvLoad2(half bool, addr, tmp string) (pre, operand string) {
	if half {
		return fmt.Sprintf("\tVCVTPH2PS %s, %s\n", addr, tmp), tmp
	}
	return "", addr
}

// dot2 writes dotAVX2: a · b over n floats (a multiple of 32), four
// independent accumulators.
func (a *asm) dot2() {
	a.lines(`
// func dotAVX2(a, b *float32, n int) float32
// a · b over n floats (a multiple of 32), four accumulators.`)
	a.l(`TEXT ·dotAVX2(SB), NOSPLIT, $0-28`)
	a.code(`
MOVQ a+0(FP), SI
MOVQ b+8(FP), DI
MOVQ n+16(FP), CX
VXORPS Y0, Y0, Y0
VXORPS Y1, Y1, Y1
VXORPS Y2, Y2, Y2
VXORPS Y3, Y3, Y3
TESTQ CX, CX
JEQ dot2sum
dot2loop:`)
	for i := 0; i < 4; i++ {
		a.l("\tVMOVUPS %s(SI), Y%d", off(32*i), 4+i)
		a.l("\tVFMADD231PS %s(DI), Y%d, Y%d", off(32*i), 4+i, i)
	}
	a.code(`
ADDQ $128, SI
ADDQ $128, DI
SUBQ $32, CX
JNZ dot2loop
dot2sum:
VADDPS Y1, Y0, Y0
VADDPS Y3, Y2, Y2
VADDPS Y2, Y0, Y0
VEXTRACTF128 $1, Y0, X1
VADDPS X1, X0, X0
VHADDPS X0, X0, X0
VHADDPS X0, X0, X0
VZEROUPPER
MOVSS X0, ret+24(FP)
RET`)
}

// scores2 writes scores{4,1}AVX2 (float32 keys) or scores{4,1}F16AVX2:
// out[p] = q · k[p*stride : p*stride+hd] for n keys (a multiple of R), R
// keys at a time, one accumulator each, hd a multiple of 8.
func (a *asm) scores2(half bool, R int) {
	name, kt, eb, lbl := fmt.Sprintf("scores%dAVX2", R), "float32", 4, fmt.Sprintf("s2%d", R)
	if half {
		name, kt, eb, lbl = fmt.Sprintf("scores%dF16AVX2", R), "uint16", 2, fmt.Sprintf("h2%d", R)
	}
	a.l("// func %s(q *float32, k *%s, stride int, n int, hd int, out *float32)", name, kt)
	a.l("// out[p] = q · key p (stride elements apart) for n keys, %d at a time.", R)
	a.l("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	a.code(fmt.Sprintf(`
MOVQ q+0(FP), SI
MOVQ k+8(FP), DI
MOVQ stride+16(FP), R8
SHLQ $%d, R8
MOVQ n+24(FP), CX
MOVQ hd+32(FP), R9
MOVQ out+40(FP), DX
LEAQ (R8)(R8*2), R10
TESTQ CX, CX
JEQ %sdone
%skeys:`, eb/2, lbl, lbl))
	for r := 0; r < R; r++ {
		a.l("\tVXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	a.code(fmt.Sprintf(`
XORQ BX, BX
MOVQ DI, R11
%sdim:
VMOVUPS (SI)(BX*4), Y4`, lbl))
	rows := []string{"(R11)", "(R11)(R8*1)", "(R11)(R8*2)", "(R11)(R10*1)"}
	for r := 0; r < R; r++ {
		pre, op := kvLoad2(half, rows[r], fmt.Sprintf("Y%d", 5+r))
		a.b.WriteString(pre)
		a.l("\tVFMADD231PS %s, Y4, Y%d", op, r)
	}
	a.code(fmt.Sprintf(`
ADDQ $%d, R11
ADDQ $8, BX
CMPQ BX, R9
JLT %sdim`, 8*eb, lbl))
	if R == 4 {
		a.hsum4Store()
		a.code(`
ADDQ $16, DX
LEAQ (DI)(R8*4), DI`)
	} else {
		a.code(`
VEXTRACTF128 $1, Y0, X1
VADDPS X1, X0, X0
VHADDPS X0, X0, X0
VHADDPS X0, X0, X0
MOVSS X0, (DX)
ADDQ $4, DX
ADDQ R8, DI`)
	}
	a.code(fmt.Sprintf(`
SUBQ $%d, CX
JNZ %skeys
%sdone:
VZEROUPPER
RET`, R, lbl, lbl))
}

// wsum2 writes wsum{64,32}AVX2 (float32 values) or wsum{64,32}F16AVX2:
// out[d] += Σ_p w[p]·v[p*stride+d] for hd a multiple of C, C columns (C/8
// accumulators) at a time.
func (a *asm) wsum2(half bool, C int) {
	name, vt, eb, lbl := fmt.Sprintf("wsum%dAVX2", C), "float32", 4, fmt.Sprintf("w2%d", C)
	if half {
		name, vt, eb, lbl = fmt.Sprintf("wsum%dF16AVX2", C), "uint16", 2, fmt.Sprintf("hw2%d", C)
	}
	acc := C / 8
	a.l("// func %s(w *float32, v *%s, stride int, n int, hd int, out *float32)", name, vt)
	a.l("// out[d] += sum_p w[p] * v[p*stride+d] for d < hd (a multiple of %d): per %d", C, C)
	a.l("// columns, %d independent accumulators take each position's weight.", acc)
	a.l("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	a.code(fmt.Sprintf(`
MOVQ w+0(FP), SI
MOVQ v+8(FP), DI
MOVQ stride+16(FP), R8
SHLQ $%d, R8
MOVQ n+24(FP), CX
MOVQ hd+32(FP), R9
SHLQ $2, R9
MOVQ out+40(FP), DX
TESTQ CX, CX
JEQ %sdone
XORQ BX, BX
XORQ AX, AX
%schunk:`, eb/2, lbl, lbl))
	for i := 0; i < acc; i++ {
		a.l("\tVMOVUPS %s(DX)(BX*1), Y%d", off(32*i), i)
	}
	a.code(fmt.Sprintf(`
MOVQ SI, R10
LEAQ (DI)(AX*1), R11
MOVQ CX, R12
%spos:
VBROADCASTSS (R10), Y8`, lbl))
	for i := 0; i < acc; i++ {
		pre, op := kvLoad2(half, off(8*eb*i)+"(R11)", fmt.Sprintf("Y%d", 9+i%4))
		a.b.WriteString(pre)
		a.l("\tVFMADD231PS %s, Y8, Y%d", op, i)
	}
	a.code(fmt.Sprintf(`
ADDQ $4, R10
ADDQ R8, R11
DECQ R12
JNZ %spos`, lbl))
	for i := 0; i < acc; i++ {
		a.l("\tVMOVUPS Y%d, %s(DX)(BX*1)", i, off(32*i))
	}
	a.code(fmt.Sprintf(`
ADDQ $%d, BX
ADDQ $%d, AX
CMPQ BX, R9
JLT %schunk
%sdone:
VZEROUPPER
RET`, 4*C, eb*C, lbl, lbl))
}

// expConsts2 broadcasts the constants of the exp polynomial into Y6–Y15
// (the same as expConsts'); the argument clamps are the vectors exphi2
// (88.0, so that 2^n stays finite) and explo2 (−87.3, so that it stays
// normal).
func (a *asm) expConsts2() {
	for i, v := range []float64{1.44269504088896341, 0.693359375, -2.12194440e-4,
		1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
		1.6666665459e-1, 5.0000001201e-1, 1.0} {
		a.l("\tMOVL $%s, AX", bits(v))
		a.l("\tVMOVD AX, X%d", 6+i)
		a.l("\tVPBROADCASTD X%d, Y%d", 6+i, 6+i)
	}
}

// exp2 sets ymm x = exp(x), clobbering t1 and t2: expf's reduction and
// polynomial on the clamped argument, 2^n built in the exponent bits
// (n + 127 never leaves [1, 254] after the clamp, so arguments below −87.3
// give about 1e-38 instead of 0 and above 88 about 1.7e38 instead of +Inf).
func (a *asm) exp2(x, t1, t2 string) {
	a.l("\tVMINPS exphi2<>(SB), %s, %s", x, x)
	a.l("\tVMAXPS explo2<>(SB), %s, %s", x, x)
	a.l("\tVMULPS Y6, %s, %s", x, t1)
	a.l("\tVROUNDPS $0, %s, %s", t1, t1)
	a.l("\tVFNMADD231PS Y7, %s, %s", t1, x)
	a.l("\tVFNMADD231PS Y8, %s, %s", t1, x)
	a.l("\tVMOVAPS Y9, %s", t2)
	for c := 10; c <= 14; c++ {
		a.l("\tVFMADD213PS Y%d, %s, %s", c, x, t2)
	}
	a.l("\tVMULPS %s, %s, %s", x, t2, t2)
	a.l("\tVFMADD213PS %s, %s, %s", x, x, t2)
	a.l("\tVADDPS Y15, %s, %s", t2, t2)
	a.l("\tVCVTPS2DQ %s, %s", t1, t1)
	a.l("\tVPSLLD $23, %s, %s", t1, t1)
	a.l("\tVPADDD Y15, %s, %s", t1, t1)
	a.l("\tVMULPS %s, %s, %s", t1, t2, x)
}
