package asmgen

// Verbatim parts of qdotgen_amd64.s: the macros the stored-format kernels
// share (each written once here) and the kernels that have no twin.

const macrosHalf = `// HSUM8 reduces the 8 floats of Y0 into X0's low lane.
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
	VBROADCASTSS Xdst, Ydst`

const q4_0 = `// func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32
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
	RET`

const macrosK = `// KHEAD loads d·xd (broadcast in Y6) and dmin·xd (broadcast in X7) of a
// Q4_K/Q5_K block at SI, and adds dmin·xd·Σ_j m_j·(Σx)_j to X3 (subtracted
// at the end). Needs the mins in X9 (KSCALESV). Clobbers AX, X4, X5, X10, X11.
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
	VPAND Y14, Y11, Y11`

const macrosQ6 = `// q6shuf picks, from a dword [a b] broadcast to every lane, word a for the
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
	Q6Q(xo+96, so+12)`

const macrosX4 = `// X4GROUP does sub-blocks 2g and 2g+1 (nibbles in Y10, Y11) for the four
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
	VFNMADD231PS Y10, Y13, Yacc`

const macrosQ6X4 = `DATA q6mask30<>+0(SB)/8, $0x3030303030303030
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
	VFMADD231PS Y15, Y11, Yacc`

const macrosQ5X4 = `DATA q5mask10<>+0(SB)/8, $0x1010101010101010
DATA q5mask10<>+8(SB)/8, $0x1010101010101010
DATA q5mask10<>+16(SB)/8, $0x1010101010101010
DATA q5mask10<>+24(SB)/8, $0x1010101010101010
GLOBL q5mask10<>(SB), RODATA|NOPTR, $32`

const macrosQ8X4 = `// Q8X4ROW multiplies the signed weights of one Q8_0 block (Y9, |w| in Y10)
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
	VFMADD231PS Y13, Y12, Yacc`

const macrosQ8 = `// Q8BLK does one Q8_0 block into the float accumulator Yacc. The scale
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
	ADDQ $4, DX`
const x4Q6K = `	VPMOVSXBW 192(SI), Y12
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
	Q6X4ROW((DX)(R8*1), Y7, Y3)`

const x4Q8 = `	MOVWLZX (SI), AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	VMOVDQU 2(SI), Y9
	VPABSB Y9, Y10
	Q8X4ROW((DI), (DX), Y0)
	Q8X4ROW((DI)(R12*1), (DX)(R14*1), Y1)
	Q8X4ROW((DI)(R12*2), (DX)(R14*2), Y2)
	Q8X4ROW((DI)(R13*1), (DX)(R8*1), Y3)`
