package asmgen

// f16round writes f16round_amd64.s: roundF16AVX2, which scales float32
// values and rounds them to float16 in place (the probabilities of the
// F16-cache softmax, softmaxF16Vec), 8 at a time with F16C: VMULPS, then
// VCVTPS2PH with round-to-nearest-even and VCVTPH2PS back, the same IEEE
// operations as the scalar quant.F32ToF16 / quant.F16ToF32 pair.
func f16round() string {
	var a asm
	a.header()
	a.lines(`
// func roundF16AVX2(x *float32, n int, s float32)
// x[i] = float16(x[i]·s) for i < n, n a multiple of 8.`)
	a.l(`TEXT ·roundF16AVX2(SB), NOSPLIT, $0-20`)
	a.code(`
MOVQ x+0(FP), SI
MOVQ n+8(FP), CX
VBROADCASTSS s+16(FP), Y1
SHRQ $3, CX
JEQ f16rdone
f16rloop:
VMULPS (SI), Y1, Y0
VCVTPS2PH $0, Y0, X0
VCVTPH2PS X0, Y0
VMOVUPS Y0, (SI)
ADDQ $32, SI
DECQ CX
JNZ f16rloop
f16rdone:
VZEROUPPER
RET`)
	return a.b.String()
}
