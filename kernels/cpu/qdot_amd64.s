//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 activation quantizer (see qmat.go): hand-written; the AVX2
// kernels on stored weight encodings are generated into qdotgen_amd64.s.

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
