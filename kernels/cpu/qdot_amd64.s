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

// HALFTILE is the body of the 4×2 half-float tiles: LOADW converts 8
// weights of row 0 (at SI) and row 1 (at SI+R8) into Y8 and Y9; 4
// activation rows (DI, R9 bytes apart) accumulate into Y0-Y7 (row r,
// weight c in Y(2r+c)).
#define HALFTILE(LOADW, label) \
	MOVQ w+0(FP), SI; \
	MOVQ ws+8(FP), R8; \
	MOVQ x+16(FP), DI; \
	MOVQ xs+24(FP), R9; \
	SHLQ $2, R9; \
	LEAQ (R9)(R9*2), R10; \
	MOVQ n+32(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
label: \
	LOADW; \
	VMOVUPS (DI), Y10; \
	VFMADD231PS Y8, Y10, Y0; \
	VFMADD231PS Y9, Y10, Y1; \
	VMOVUPS (DI)(R9*1), Y11; \
	VFMADD231PS Y8, Y11, Y2; \
	VFMADD231PS Y9, Y11, Y3; \
	VMOVUPS (DI)(R9*2), Y10; \
	VFMADD231PS Y8, Y10, Y4; \
	VFMADD231PS Y9, Y10, Y5; \
	VMOVUPS (DI)(R10*1), Y11; \
	VFMADD231PS Y8, Y11, Y6; \
	VFMADD231PS Y9, Y11, Y7; \
	ADDQ $16, SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX; \
	JNZ  label; \
	MOVQ out+40(FP), DX; \
	VHADDPS Y1, Y0, Y0; \
	VHADDPS Y3, Y2, Y2; \
	VHADDPS Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVUPS X0, (DX); \
	VHADDPS Y5, Y4, Y4; \
	VHADDPS Y7, Y6, Y6; \
	VHADDPS Y6, Y4, Y4; \
	VEXTRACTF128 $1, Y4, X5; \
	VADDPS X5, X4, X4; \
	VMOVUPS X4, 16(DX); \
	VZEROUPPER; \
	RET

#define LOADF16 \
	VCVTPH2PS (SI), Y8; \
	VCVTPH2PS (SI)(R8*1), Y9

#define LOADBF16 \
	VPMOVZXWD (SI), Y8; \
	VPMOVZXWD (SI)(R8*1), Y9; \
	VPSLLD $16, Y8, Y8; \
	VPSLLD $16, Y9, Y9

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

// qperm reorders the dwords of two VPACKSSDW + VPACKSSWB results into
// element order.
DATA qperm<>+0(SB)/4, $0
DATA qperm<>+4(SB)/4, $4
DATA qperm<>+8(SB)/4, $1
DATA qperm<>+12(SB)/4, $5
DATA qperm<>+16(SB)/4, $2
DATA qperm<>+20(SB)/4, $6
DATA qperm<>+24(SB)/4, $3
DATA qperm<>+28(SB)/4, $7
GLOBL qperm<>(SB), RODATA|NOPTR, $32

// func quantActAVX2(x *float32, q *int8, d *float32, bs *int16, nblk int, blk int)
// blk is 32 or 256. Per block: inv = 127/max|x|, q = x·inv rounded to
// nearest even (VCVTPS2DQ under the default MXCSR; inv = 0 where it
// overflows), d = float16(max|x|/127) for blk 32 and 1/inv for blk 256,
// and the sums of every 16 q; the same arithmetic as quantizeActRow (see
// actBlock), bit for bit.
TEXT ·quantActAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nblk+32(FP), CX
	MOVQ blk+40(FP), R8
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU qperm<>(SB), Y14
	MOVL $0x01010101, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00010001, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X11
qablk:
	VXORPS Y0, Y0, Y0
	MOVQ SI, R9
	MOVQ R8, R10
qamax:
	VANDPS (R9), Y15, Y1
	VMAXPS Y1, Y0, Y0
	ADDQ $32, R9
	SUBQ $8, R10
	JNZ  qamax
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VDIVSS X0, X11, X3 // inv = 127/amax
	CMPQ R8, $256
	JEQ  qadk
	VDIVSS X11, X0, X4 // blk 32: d = float16(amax/127)
	VCVTPS2PH $0, X4, X4
	VCVTPH2PS X4, X4
	JMP  qads
qadk:
	MOVL $0x3f800000, AX // blk 256: d = 1/inv
	VMOVD AX, X4
	VDIVSS X3, X4, X4
qads:
	VMOVSS X4, (DX)
	MOVL $0x7f800000, AX // inv = +Inf (amax 0 or tiny): q = 0
	VMOVD AX, X4
	VUCOMISS X4, X3
	JNE  qazero
	VXORPS X3, X3, X3
qazero:
	VBROADCASTSS X3, Y3
	MOVQ R8, R10
qaq:
	VMULPS (SI), Y3, Y4
	VMULPS 32(SI), Y3, Y5
	VMULPS 64(SI), Y3, Y6
	VMULPS 96(SI), Y3, Y7
	VCVTPS2DQ Y4, Y4
	VCVTPS2DQ Y5, Y5
	VCVTPS2DQ Y6, Y6
	VCVTPS2DQ Y7, Y7
	VPACKSSDW Y5, Y4, Y4
	VPACKSSDW Y7, Y6, Y6
	VPACKSSWB Y6, Y4, Y4
	VPERMD Y4, Y14, Y4
	VMOVDQU Y4, (DI)
	VPMADDUBSW Y4, Y13, Y5
	VPMADDWD Y12, Y5, Y5
	VPHADDD Y5, Y5, Y5
	VPHADDD Y5, Y5, Y5
	VMOVD X5, AX
	MOVW AX, (BX)
	VEXTRACTI128 $1, Y5, X6
	VMOVD X6, AX
	MOVW AX, 2(BX)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, BX
	SUBQ $32, R10
	JNZ  qaq
	ADDQ $4, DX
	DECQ CX
	JNZ  qablk
	VZEROUPPER
	RET

// func tileF16AVX2(w *byte, ws int, x *float32, xs int, n int, out *[8]float32)
// out[2r+c] = x row r · F16 weight row c over n values (a multiple of 8);
// weight rows are ws bytes apart, activation rows xs floats.
TEXT ·tileF16AVX2(SB), NOSPLIT, $0-48
	HALFTILE(LOADF16, tf16loop)

// func tileBF16AVX2(w *byte, ws int, x *float32, xs int, n int, out *[8]float32)
TEXT ·tileBF16AVX2(SB), NOSPLIT, $0-48
	HALFTILE(LOADBF16, tbf16loop)

// KSCALES2 is KSCALES using fewer registers: scales as words at 0(SP),
// mins as words in X9. Clobbers AX, R8-R11, X8.
#define KSCALES2 \
	MOVL 4(SI), R8; \
	MOVL 8(SI), R9; \
	MOVL 12(SI), R10; \
	MOVL R8, R11; \
	ANDL $0x3f3f3f3f, R11; \
	VMOVD R11, X8; \
	MOVL R10, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL R8, AX; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R11; \
	VPINSRD $1, R11, X8, X8; \
	MOVL R9, R11; \
	ANDL $0x3f3f3f3f, R11; \
	VMOVD R11, X9; \
	MOVL R10, R11; \
	SHRL $4, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL R9, AX; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R11; \
	VPINSRD $1, R11, X9, X9; \
	VPMOVZXBW X8, X8; \
	VMOVDQU X8, 0(SP); \
	VPMOVZXBW X9, X9

// X4GROUP does sub-blocks 2g and 2g+1 (nibbles in Y10, Y11) for the four
// activation rows at DI, DI+R12, DI+2·R12, DI+R13, into Y4-Y7.
#define X4GROUP(g) \
	VPBROADCASTW (4*g)(SP), Y12; \
	VPBROADCASTW (4*g+2)(SP), Y13; \
	VPMADDUBSW (64*g)(DI), Y10, Y15; \
	VPMADDWD Y12, Y15, Y15; \
	VPADDD Y15, Y4, Y4; \
	VPMADDUBSW (64*g+32)(DI), Y11, Y15; \
	VPMADDWD Y13, Y15, Y15; \
	VPADDD Y15, Y4, Y4; \
	VPMADDUBSW (64*g)(DI)(R12*1), Y10, Y15; \
	VPMADDWD Y12, Y15, Y15; \
	VPADDD Y15, Y5, Y5; \
	VPMADDUBSW (64*g+32)(DI)(R12*1), Y11, Y15; \
	VPMADDWD Y13, Y15, Y15; \
	VPADDD Y15, Y5, Y5; \
	VPMADDUBSW (64*g)(DI)(R12*2), Y10, Y15; \
	VPMADDWD Y12, Y15, Y15; \
	VPADDD Y15, Y6, Y6; \
	VPMADDUBSW (64*g+32)(DI)(R12*2), Y11, Y15; \
	VPMADDWD Y13, Y15, Y15; \
	VPADDD Y15, Y6, Y6; \
	VPMADDUBSW (64*g)(DI)(R13*1), Y10, Y15; \
	VPMADDWD Y12, Y15, Y15; \
	VPADDD Y15, Y7, Y7; \
	VPMADDUBSW (64*g+32)(DI)(R13*1), Y11, Y15; \
	VPMADDWD Y13, Y15, Y15; \
	VPADDD Y15, Y7, Y7

// X4ROW folds row r's super-block into its float accumulator Yacc: the
// integer sums Yint times d·xd_r, minus dmin·xd_r·Σ_j m_j·(Σx)_j. xdm and
// bsm address the row's activation scale and sums. Needs [d, dmin] in X8,
// mins in X9. Clobbers X10-X13, Y15.
#define X4ROW(xdm, bsm, bsm16, Yint, Yacc) \
	VBROADCASTSS xdm, X12; \
	VMULPS X12, X8, X12; \
	VBROADCASTSS X12, Y13; \
	VCVTDQ2PS Yint, Y15; \
	VFMADD231PS Y15, Y13, Yacc; \
	VSHUFPS $0x55, X12, X12, X13; \
	VMOVDQU bsm, X10; \
	VMOVDQU bsm16, X11; \
	VPHADDW X11, X10, X10; \
	VPMADDWD X9, X10, X10; \
	VCVTDQ2PS X10, X10; \
	VFNMADD231PS Y10, Y13, Yacc

// func dotQ4Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)
// One Q4_K row against 4 activation rows (xs bytes, xds floats of scales
// and bss int16 sums apart): each decoded nibble vector feeds all four.
TEXT ·dotQ4Kx4AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xs+16(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ xd+24(FP), DX
	MOVQ xds+32(FP), R14
	SHLQ $2, R14
	MOVQ bs+40(FP), BX
	MOVQ bss+48(FP), R15
	SHLQ $1, R15
	MOVQ nb+56(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
q4kx4loop:
	KSCALES2
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	Q4NIB(16)
	X4GROUP(0)
	Q4NIB(48)
	X4GROUP(1)
	Q4NIB(80)
	X4GROUP(2)
	Q4NIB(112)
	X4GROUP(3)
	MOVL (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	X4ROW((DX), (BX), 16(BX), Y4, Y0)
	X4ROW((DX)(R14*1), (BX)(R15*1), 16(BX)(R15*1), Y5, Y1)
	X4ROW((DX)(R14*2), (BX)(R15*2), 16(BX)(R15*2), Y6, Y2)
	LEAQ (R14)(R14*2), AX
	LEAQ (R15)(R15*2), R8
	X4ROW((DX)(AX*1), (BX)(R8*1), 16(BX)(R8*1), Y7, Y3)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q4kx4loop
	MOVQ out+64(FP), DX
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

DATA q6mask30<>+0(SB)/8, $0x3030303030303030
DATA q6mask30<>+8(SB)/8, $0x3030303030303030
DATA q6mask30<>+16(SB)/8, $0x3030303030303030
DATA q6mask30<>+24(SB)/8, $0x3030303030303030
GLOBL q6mask30<>(SB), RODATA|NOPTR, $32

// Q6X4Q multiplies the 6-bit values in Y8 (32 values at activation offset
// xo) with the four activation rows and the two group scales whose words
// are at so(SP), adding to Y4-Y7. Clobbers Y9, Y15.
#define Q6X4Q(xo, so) \
	VPBROADCASTD so(SP), Y9; \
	VPSHUFB q6shuf<>(SB), Y9, Y9; \
	VPMADDUBSW xo(DI), Y8, Y15; \
	VPMADDWD Y9, Y15, Y15; \
	VPADDD Y15, Y4, Y4; \
	VPMADDUBSW xo(DI)(R12*1), Y8, Y15; \
	VPMADDWD Y9, Y15, Y15; \
	VPADDD Y15, Y5, Y5; \
	VPMADDUBSW xo(DI)(R12*2), Y8, Y15; \
	VPMADDWD Y9, Y15, Y15; \
	VPADDD Y15, Y6, Y6; \
	VPMADDUBSW xo(DI)(R13*1), Y8, Y15; \
	VPMADDWD Y9, Y15, Y15; \
	VPADDD Y15, Y7, Y7

// Q6X4HALF is Q6HALF for four activation rows (qh in Y13).
#define Q6X4HALF(ql, qh, xo, so) \
	VMOVDQU ql(SI), Y10; \
	VMOVDQU (ql+32)(SI), Y11; \
	VMOVDQU qh(SI), Y13; \
	VPAND Y14, Y10, Y8; \
	VPSLLW $4, Y13, Y9; \
	VPAND q6mask30<>(SB), Y9, Y9; \
	VPOR Y9, Y8, Y8; \
	Q6X4Q(xo, so); \
	VPAND Y14, Y11, Y8; \
	VPSLLW $2, Y13, Y9; \
	VPAND q6mask30<>(SB), Y9, Y9; \
	VPOR Y9, Y8, Y8; \
	Q6X4Q(xo+32, so+4); \
	VPSRLW $4, Y10, Y8; \
	VPAND Y14, Y8, Y8; \
	VPAND q6mask30<>(SB), Y13, Y9; \
	VPOR Y9, Y8, Y8; \
	Q6X4Q(xo+64, so+8); \
	VPSRLW $4, Y11, Y8; \
	VPAND Y14, Y8, Y8; \
	VPSRLW $2, Y13, Y9; \
	VPAND q6mask30<>(SB), Y9, Y9; \
	VPOR Y9, Y8, Y8; \
	Q6X4Q(xo+96, so+12)

// Q6X4INIT sets the int accumulator Yint of one row to −32·Σ_i sc_i·(Σx)_i
// (scales as words in Y12; the row's sums at bsm).
#define Q6X4INIT(bsm, Yint) \
	VPMADDWD bsm, Y12, Y15; \
	VPSLLD $5, Y15, Y15; \
	VPXOR Yint, Yint, Yint; \
	VPSUBD Y15, Yint, Yint

// Q6X4ROW adds row r's super-block to its float accumulator: Yint times
// d·xd_r (d in X10; xdm addresses xd_r).
#define Q6X4ROW(xdm, Yint, Yacc) \
	VMULSS xdm, X10, X11; \
	VBROADCASTSS X11, Y11; \
	VCVTDQ2PS Yint, Y15; \
	VFMADD231PS Y15, Y11, Yacc

// func dotQ6Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)
// One Q6_K row against 4 activation rows, as dotQ4Kx4AVX2.
TEXT ·dotQ6Kx4AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xs+16(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ xd+24(FP), DX
	MOVQ xds+32(FP), R14
	SHLQ $2, R14
	LEAQ (R14)(R14*2), R8
	MOVQ bs+40(FP), BX
	MOVQ bss+48(FP), R15
	SHLQ $1, R15
	LEAQ (R15)(R15*2), R9
	MOVQ nb+56(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
q6kx4loop:
	VPMOVSXBW 192(SI), Y12
	VMOVDQU Y12, 0(SP)
	Q6X4INIT((BX), Y4)
	Q6X4INIT((BX)(R15*1), Y5)
	Q6X4INIT((BX)(R15*2), Y6)
	Q6X4INIT((BX)(R9*1), Y7)
	Q6X4HALF(0, 128, 0, 0)
	Q6X4HALF(64, 160, 128, 16)
	MOVWLZX 208(SI), AX
	VMOVD AX, X10
	VCVTPH2PS X10, X10
	Q6X4ROW((DX), Y4, Y0)
	Q6X4ROW((DX)(R14*1), Y5, Y1)
	Q6X4ROW((DX)(R14*2), Y6, Y2)
	Q6X4ROW((DX)(R8*1), Y7, Y3)
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q6kx4loop
	MOVQ out+64(FP), DX
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

DATA q5mask10<>+0(SB)/8, $0x1010101010101010
DATA q5mask10<>+8(SB)/8, $0x1010101010101010
DATA q5mask10<>+16(SB)/8, $0x1010101010101010
DATA q5mask10<>+24(SB)/8, $0x1010101010101010
GLOBL q5mask10<>(SB), RODATA|NOPTR, $32

// Q5X4HI ors the fifth bits of group g into Y10 and Y11 from the qh bytes
// in Y8 (see Q5HI_L): Y15 holds qh shifted so that bit 2g (for the low
// nibbles) or 2g+1 (high nibbles) sits at bit 4 of each byte.
#define Q5X4LO \
	VPAND q5mask10<>(SB), Y15, Y15; \
	VPOR Y15, Y10, Y10

#define Q5X4HIGH \
	VPAND q5mask10<>(SB), Y15, Y15; \
	VPOR Y15, Y11, Y11

// func dotQ5Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)
// One Q5_K row against 4 activation rows, as dotQ4Kx4AVX2.
TEXT ·dotQ5Kx4AVX2(SB), NOSPLIT, $32-72
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xs+16(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ xd+24(FP), DX
	MOVQ xds+32(FP), R14
	SHLQ $2, R14
	MOVQ bs+40(FP), BX
	MOVQ bss+48(FP), R15
	SHLQ $1, R15
	MOVQ nb+56(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
q5kx4loop:
	KSCALES2
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VMOVDQU 16(SI), Y8
	Q4NIB(48)
	VPSLLW $4, Y8, Y15
	Q5X4LO
	VPSLLW $3, Y8, Y15
	Q5X4HIGH
	X4GROUP(0)
	Q4NIB(80)
	VPSLLW $2, Y8, Y15
	Q5X4LO
	VPSLLW $1, Y8, Y15
	Q5X4HIGH
	X4GROUP(1)
	Q4NIB(112)
	VMOVDQU Y8, Y15
	Q5X4LO
	VPSRLW $1, Y8, Y15
	Q5X4HIGH
	X4GROUP(2)
	Q4NIB(144)
	VPSRLW $2, Y8, Y15
	Q5X4LO
	VPSRLW $3, Y8, Y15
	Q5X4HIGH
	X4GROUP(3)
	MOVL (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	X4ROW((DX), (BX), 16(BX), Y4, Y0)
	X4ROW((DX)(R14*1), (BX)(R15*1), 16(BX)(R15*1), Y5, Y1)
	X4ROW((DX)(R14*2), (BX)(R15*2), 16(BX)(R15*2), Y6, Y2)
	LEAQ (R14)(R14*2), AX
	LEAQ (R15)(R15*2), R8
	X4ROW((DX)(AX*1), (BX)(R8*1), 16(BX)(R8*1), Y7, Y3)
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  q5kx4loop
	MOVQ out+64(FP), DX
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// Q8X4ROW multiplies the signed weights of one Q8_0 block (Y9, |w| in Y10)
// with the block of one activation row at xm (scale at xdm), adding
// d_w·d_x·Σ w·x to Yacc (d_w in X8). Clobbers X11, Y12, Y13.
#define Q8X4ROW(xm, xdm, Yacc) \
	VMOVDQU xm, Y13; \
	VPSIGNB Y9, Y13, Y13; \
	VPMADDUBSW Y13, Y10, Y13; \
	VPMADDWD Y15, Y13, Y13; \
	VCVTDQ2PS Y13, Y13; \
	VMULSS xdm, X8, X11; \
	VBROADCASTSS X11, Y12; \
	VFMADD231PS Y13, Y12, Yacc

// func dotQ8_0x4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, nb int, out *[4]float32)
// One Q8_0 row against 4 activation rows (xs bytes and xds scales apart):
// each weight block is loaded, and its signs and magnitudes split, once.
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xs+16(FP), R12
	LEAQ (R12)(R12*2), R13
	MOVQ xd+24(FP), DX
	MOVQ xds+32(FP), R14
	SHLQ $2, R14
	LEAQ (R14)(R14*2), R8
	MOVQ nb+40(FP), CX
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
q8x4loop:
	MOVWLZX (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	VMOVDQU 2(SI), Y9
	VPABSB Y9, Y10
	Q8X4ROW((DI), (DX), Y0)
	Q8X4ROW((DI)(R12*1), (DX)(R14*1), Y1)
	Q8X4ROW((DI)(R12*2), (DX)(R14*2), Y2)
	Q8X4ROW((DI)(R13*1), (DX)(R8*1), Y3)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q8x4loop
	MOVQ out+48(FP), DX
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// Batch-1 row loops: each computes rows consecutive weight rows (rb bytes
// apart) against one activation row, writing out[0:rows], so that a
// MatMul's range of rows costs one call instead of one per row. The
// per-row arithmetic is that of the single-row kernels above, bit for bit.

// func dotQ4KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
TEXT ·dotQ4KRowsAVX2(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), SI
	MOVQ out+48(FP), R15
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
q4krows:
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS X3, X3, X3
q4krowloop:
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
	JNZ  q4krowloop
	HSUM8
	VHADDPS X3, X3, X3
	VHADDPS X3, X3, X3
	VSUBSS X3, X0, X0
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ rows+40(FP)
	JNZ  q4krows
	VZEROUPPER
	RET

// func dotQ6KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
TEXT ·dotQ6KRowsAVX2(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), SI
	MOVQ out+48(FP), R15
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x30303030, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU q6shuf<>(SB), Y12
q6krows:
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	VXORPS Y0, Y0, Y0
q6krowloop:
	SCALE(208(SI), (DX), X6, Y6)
	VPMOVSXBW 192(SI), Y8
	VMOVDQU Y8, 0(SP)
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
	JNZ  q6krowloop
	HSUM8
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ rows+40(FP)
	JNZ  q6krows
	VZEROUPPER
	RET

// Q8BLK does one Q8_0 block into the float accumulator Yacc. The scale
// d_w·d_x is formed in every lane at once (broadcast f16, widen, multiply):
// the same product as SCALE's, without the trip through a general register.
#define Q8BLK(Yacc) \
	VPBROADCASTW (SI), X4; \
	VCVTPH2PS X4, Y4; \
	VBROADCASTSS (DX), Y9; \
	VMULPS Y9, Y4, Y4; \
	VMOVDQU 2(SI), Y5; \
	VMOVDQU (DI), Y7; \
	VPABSB Y5, Y6; \
	VPSIGNB Y5, Y7, Y7; \
	VPMADDUBSW Y7, Y6, Y8; \
	VPMADDWD Y15, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VFMADD231PS Y8, Y4, Yacc; \
	ADDQ $34, SI; \
	ADDQ $32, DI; \
	ADDQ $4, DX

// func dotQ8_0RowsAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)
TEXT ·dotQ8_0RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ rows+32(FP), R9
	MOVQ out+40(FP), R15
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
q8rows:
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
q8rowloop:
	Q8BLK(Y0)
	DECQ CX
	JZ   q8rowdone
	Q8BLK(Y1)
	DECQ CX
	JNZ  q8rowloop
q8rowdone:
	VADDPS Y1, Y0, Y0
	HSUM8
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ R9
	JNZ  q8rows
	VZEROUPPER
	RET

// func dotF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32)
// n (the row length) is a multiple of 32; rows are 2n bytes apart.
TEXT ·dotF16RowsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rows+24(FP), R9
	MOVQ out+32(FP), R15
f16rows:
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
f16rowloop:
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
	JNZ  f16rowloop
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ R9
	JNZ  f16rows
	VZEROUPPER
	RET

// func dotQ5KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
TEXT ·dotQ5KRowsAVX2(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), SI
	MOVQ out+48(FP), R15
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x10101010, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
q5krows:
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), DX
	MOVQ bs+24(FP), BX
	MOVQ nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS X3, X3, X3
q5krowloop:
	KSCALES
	KHEAD
	VMOVDQU 16(SI), Y2
	VPXOR Y1, Y1, Y1
	Q4NIB(48)
	Q5HI_L(4, 3)
	KGROUP(0)
	Q4NIB(80)
	Q5HI_L(2, 1)
	KGROUP(1)
	Q4NIB(112)
	VPAND Y15, Y2, Y4
	VPSRLW $1, Y2, Y5
	VPAND Y15, Y5, Y5
	VPOR Y4, Y10, Y10
	VPOR Y5, Y11, Y11
	KGROUP(2)
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
	JNZ  q5krowloop
	HSUM8
	VHADDPS X3, X3, X3
	VHADDPS X3, X3, X3
	VSUBSS X3, X0, X0
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ rows+40(FP)
	JNZ  q5krows
	VZEROUPPER
	RET

// func dotBF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32)
// n (the row length) is a multiple of 32; rows are 2n bytes apart.
TEXT ·dotBF16RowsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rows+24(FP), R9
	MOVQ out+32(FP), R15
bf16rows:
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
bf16rowloop:
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
	JNZ  bf16rowloop
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8
	MOVSS X0, (R15)
	ADDQ $4, R15
	DECQ R9
	JNZ  bf16rows
	VZEROUPPER
	RET
