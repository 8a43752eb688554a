//go:build amd64 && !purego

#include "textflag.h"

// AVX2 dot products of one weight row in its stored encoding (see qmat.go
// for the numeric contract). Each returns a float32; the callers handle
// tails in Go.

// HSUM8 reduces the 8 floats of Y0 into X0's low lane.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; \
	VHADDPS X0, X0, X0

// f16 → f32 of the 16-bit value at mem, times the float32 at xd, broadcast
// into Ydst (clobbers AX).
#define SCALE(mem, xd, Xdst, Ydst) \
	MOVWLZX mem, AX; \
	VMOVD AX, Xdst; \
	VCVTPH2PS Xdst, Xdst; \
	VMULSS xd, Xdst, Xdst; \
	VBROADCASTSS Xdst, Ydst

// func dotF16AVX2(w *byte, x *float32, n int) float32
// n is a multiple of 32.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
f16loop:
	VCVTPH2PS (SI), Y4
	VCVTPH2PS 16(SI), Y5
	VCVTPH2PS 32(SI), Y6
	VCVTPH2PS 48(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JNZ  f16loop
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotBF16AVX2(w *byte, x *float32, n int) float32
// n is a multiple of 32.
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
bf16loop:
	VPMOVZXWD (SI), Y4
	VPMOVZXWD 16(SI), Y5
	VPMOVZXWD 32(SI), Y6
	VPMOVZXWD 48(SI), Y7
	VPSLLD $16, Y4, Y4
	VPSLLD $16, Y5, Y5
	VPSLLD $16, Y6, Y6
	VPSLLD $16, Y7, Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JNZ  bf16loop
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ8_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32
// Per block: Σ w·x as |w| (unsigned) × x·sign(w) (signed) with VPMADDUBSW,
// pairs summed by VPMADDWD with ones, then scaled by d_w·d_x in float.
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ nb+24(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15 // 16-bit ones
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
q8loop:
	SCALE((SI), (DX), X4, Y4)
	VMOVDQU 2(SI), Y5
	VMOVDQU (DI), Y7
	VPABSB Y5, Y6
	VPSIGNB Y5, Y7, Y7
	VPMADDUBSW Y7, Y6, Y8
	VPMADDWD Y15, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JZ   q8done
	SCALE((SI), (DX), X4, Y4)
	VMOVDQU 2(SI), Y5
	VMOVDQU (DI), Y7
	VPABSB Y5, Y6
	VPSIGNB Y5, Y7, Y7
	VPMADDUBSW Y7, Y6, Y8
	VPMADDWD Y15, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y4, Y1
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q8loop
q8done:
	VADDPS Y1, Y0, Y0
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32
// Nibbles are unpacked to bytes (low nibbles, the block's first 16 values,
// in the low lane), 8 subtracted, then as Q8_0.
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ nb+24(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x08080808, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VXORPS Y0, Y0, Y0
q4loop:
	SCALE((SI), (DX), X4, Y4)
	VMOVDQU 2(SI), X5
	VPSRLW $4, X5, X6
	VINSERTI128 $1, X6, Y5, Y5
	VPAND Y14, Y5, Y5
	VPSUBB Y13, Y5, Y5
	VMOVDQU (DI), Y7
	VPABSB Y5, Y6
	VPSIGNB Y5, Y7, Y7
	VPMADDUBSW Y7, Y6, Y8
	VPMADDWD Y15, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q4loop
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// KSCALES unpacks the 12 scale bytes of a Q4_K/Q5_K block at 4(SI): the
// eight 6-bit scales are stored as 16-bit words at 0(SP), the eight 6-bit
// mins left as words in X9. Clobbers AX, R8-R14, X8.
#define KSCALES \
	MOVL 4(SI), R8; \
	MOVL 8(SI), R9; \
	MOVL 12(SI), R10; \
	MOVL R8, R11; \
	ANDL $0x3f3f3f3f, R11; \
	MOVL R9, R12; \
	ANDL $0x3f3f3f3f, R12; \
	MOVL R10, R13; \
	ANDL $0x0f0f0f0f, R13; \
	MOVL R8, AX; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R13; \
	MOVL R10, R14; \
	SHRL $4, R14; \
	ANDL $0x0f0f0f0f, R14; \
	MOVL R9, AX; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R14; \
	VMOVD R11, X8; \
	VPINSRD $1, R13, X8, X8; \
	VMOVD R12, X9; \
	VPINSRD $1, R14, X9, X9; \
	VPMOVZXBW X8, X8; \
	VMOVDQU X8, 0(SP); \
	VPMOVZXBW X9, X9

// KHEAD loads d·xd (broadcast in Y6) and dmin·xd (broadcast in X7) of a
// Q4_K/Q5_K block at SI, and adds dmin·xd·Σ_j m_j·(Σx)_j to X3 (subtracted
// at the end). Needs the mins in X9 (KSCALES). Clobbers AX, X4, X5, X10, X11.
#define KHEAD \
	MOVL (SI), AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	VBROADCASTSS (DX), X5; \
	VMULPS X5, X4, X4; \
	VBROADCASTSS X4, Y6; \
	VSHUFPS $0x55, X4, X4, X7; \
	VMOVDQU (BX), X10; \
	VMOVDQU 16(BX), X11; \
	VPHADDW X11, X10, X10; \
	VPMADDWD X9, X10, X10; \
	VCVTDQ2PS X10, X10; \
	VFMADD231PS X10, X7, X3

// KGROUP multiplies the unsigned bytes of Y10 (values 64g..64g+31) and Y11
// (64g+32..64g+63) with the activations and their sub-block scales, adding
// to the int32 lanes of Y1.
#define KGROUP(g) \
	VPMADDUBSW (64*g)(DI), Y10, Y10; \
	VPMADDUBSW (64*g+32)(DI), Y11, Y11; \
	VPBROADCASTW (4*g)(SP), Y12; \
	VPBROADCASTW (4*g+2)(SP), Y13; \
	VPMADDWD Y12, Y10, Y10; \
	VPMADDWD Y13, Y11, Y11; \
	VPADDD Y10, Y1, Y1; \
	VPADDD Y11, Y1, Y1

// Q4NIB splits the 32 bytes at off(SI) into low (Y10) and high (Y11)
// nibbles.
#define Q4NIB(off) \
	VMOVDQU off(SI), Y10; \
	VPSRLW $4, Y10, Y11; \
	VPAND Y14, Y10, Y10; \
	VPAND Y14, Y11, Y11

// func dotQ4KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32
TEXT ·dotQ4KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y0, Y0, Y0
	VXORPS X3, X3, X3
q4kloop:
	KSCALES
	KHEAD
	VPXOR Y1, Y1, Y1
	Q4NIB(16)
	KGROUP(0)
	Q4NIB(48)
	KGROUP(1)
	Q4NIB(80)
	KGROUP(2)
	Q4NIB(112)
	KGROUP(3)
	VCVTDQ2PS Y1, Y1
	VFMADD231PS Y1, Y6, Y0
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kloop
	HSUM8
	VHADDPS X3, X3, X3
	VHADDPS X3, X3, X3
	VSUBSS X3, X0, X0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// Q5HI ors the fifth bits of group g into Y10 and Y11: bit 2g of each qh
// byte (Y2) for the low nibbles, bit 2g+1 for the high ones, moved to bit 4
// by a word shift (bits never cross into bit 4 of the other byte) and
// masked with 0x10 (Y15). Clobbers Y4, Y5.
#define Q5HI_L(slo, shi) \
	VPSLLW $slo, Y2, Y4; \
	VPSLLW $shi, Y2, Y5; \
	VPAND Y15, Y4, Y4; \
	VPAND Y15, Y5, Y5; \
	VPOR Y4, Y10, Y10; \
	VPOR Y5, Y11, Y11

// func dotQ5KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32
TEXT ·dotQ5KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x10101010, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VXORPS Y0, Y0, Y0
	VXORPS X3, X3, X3
q5kloop:
	KSCALES
	KHEAD
	VMOVDQU 16(SI), Y2
	VPXOR Y1, Y1, Y1
	// group 0: bits 0 (<<4) and 1 (<<3)
	Q4NIB(48)
	Q5HI_L(4, 3)
	KGROUP(0)
	// group 1: bits 2 (<<2) and 3 (<<1)
	Q4NIB(80)
	Q5HI_L(2, 1)
	KGROUP(1)
	// group 2: bits 4 (as is) and 5 (>>1)
	Q4NIB(112)
	VPAND Y15, Y2, Y4
	VPSRLW $1, Y2, Y5
	VPAND Y15, Y5, Y5
	VPOR Y4, Y10, Y10
	VPOR Y5, Y11, Y11
	KGROUP(2)
	// group 3: bits 6 (>>2) and 7 (>>3)
	Q4NIB(144)
	VPSRLW $2, Y2, Y4
	VPSRLW $3, Y2, Y5
	VPAND Y15, Y4, Y4
	VPAND Y15, Y5, Y5
	VPOR Y4, Y10, Y10
	VPOR Y5, Y11, Y11
	KGROUP(3)
	VCVTDQ2PS Y1, Y1
	VFMADD231PS Y1, Y6, Y0
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5kloop
	HSUM8
	VHADDPS X3, X3, X3
	VHADDPS X3, X3, X3
	VSUBSS X3, X0, X0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// q6shuf picks, from a dword [a b] broadcast to every lane, word a for the
// low 128-bit lane and word b for the high one.
DATA q6shuf<>+0(SB)/8, $0x0100010001000100
DATA q6shuf<>+8(SB)/8, $0x0100010001000100
DATA q6shuf<>+16(SB)/8, $0x0302030203020302
DATA q6shuf<>+24(SB)/8, $0x0302030203020302
GLOBL q6shuf<>(SB), RODATA|NOPTR, $32

// Q6Q multiplies the 6-bit values in Y4 (32 values starting at x offset
// xo) with the activations and the two 16-value group scales whose words
// are at so(SP), adding to Y1. Clobbers Y4, Y5.
#define Q6Q(xo, so) \
	VPMADDUBSW xo(DI), Y4, Y4; \
	VPBROADCASTD so(SP), Y5; \
	VPSHUFB Y12, Y5, Y5; \
	VPMADDWD Y5, Y4, Y4; \
	VPADDD Y4, Y1, Y1

// Q6HALF does one 128-value half h of a Q6_K block: ql at 64h, qh at
// 128+32h, activations at 128h, scales at words 8h.
#define Q6HALF(ql, qh, xo, so) \
	VMOVDQU ql(SI), Y10; \
	VMOVDQU (ql+32)(SI), Y11; \
	VMOVDQU qh(SI), Y2; \
	VPAND Y14, Y10, Y4; \
	VPSLLW $4, Y2, Y5; \
	VPAND Y15, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	Q6Q(xo, so); \
	VPAND Y14, Y11, Y4; \
	VPSLLW $2, Y2, Y5; \
	VPAND Y15, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	Q6Q(xo+32, so+4); \
	VPSRLW $4, Y10, Y4; \
	VPAND Y14, Y4, Y4; \
	VPAND Y15, Y2, Y5; \
	VPOR Y5, Y4, Y4; \
	Q6Q(xo+64, so+8); \
	VPSRLW $4, Y11, Y4; \
	VPAND Y14, Y4, Y4; \
	VPSRLW $2, Y2, Y5; \
	VPAND Y15, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	Q6Q(xo+96, so+12)

// func dotQ6KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32
TEXT ·dotQ6KAVX2(SB), NOSPLIT, $32-44
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU q6shuf<>(SB), Y12
	VXORPS Y0, Y0, Y0
q6kloop:
	SCALE(208(SI), (DX), X6, Y6)
	VPMOVSXBW 192(SI), Y8
	VMOVDQU Y8, 0(SP)
	// Y1 = -32·Σ_i sc_i·(Σx)_i
	VPMADDWD (BX), Y8, Y9
	VPSLLD $5, Y9, Y9
	VPXOR Y1, Y1, Y1
	VPSUBD Y9, Y1, Y1
	Q6HALF(0, 128, 0, 0)
	Q6HALF(64, 160, 128, 16)
	VCVTDQ2PS Y1, Y1
	VFMADD231PS Y1, Y6, Y0
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q6kloop
	HSUM8
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET
