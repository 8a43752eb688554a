//go:build !purego

#include "textflag.h"

// AVX-512 kernels over float32 rows; see kernels_amd64.go for their
// contracts. Every kernel takes a length that is a positive multiple of its
// step (64 for maxAVX512, 16 for the others); the Go wrappers handle tails.

DATA iota32<>+0(SB)/4, $0
DATA iota32<>+4(SB)/4, $1
DATA iota32<>+8(SB)/4, $2
DATA iota32<>+12(SB)/4, $3
DATA iota32<>+16(SB)/4, $4
DATA iota32<>+20(SB)/4, $5
DATA iota32<>+24(SB)/4, $6
DATA iota32<>+28(SB)/4, $7
DATA iota32<>+32(SB)/4, $8
DATA iota32<>+36(SB)/4, $9
DATA iota32<>+40(SB)/4, $10
DATA iota32<>+44(SB)/4, $11
DATA iota32<>+48(SB)/4, $12
DATA iota32<>+52(SB)/4, $13
DATA iota32<>+56(SB)/4, $14
DATA iota32<>+60(SB)/4, $15
GLOBL iota32<>(SB), RODATA|NOPTR, $64

// func maxAVX512(x []float32, out *[16]float32)
// out gets 16 lane maxima of x (NaNs ignored; -inf when a lane saw none).
TEXT ·maxAVX512(SB), NOSPLIT, $0-32
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ out+24(FP), DI
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3

maxloop:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	// vmaxps acc, data, acc: when data is NaN the second source (acc) wins.
	VMAXPS Z0, Z4, Z0
	VMAXPS Z1, Z5, Z1
	VMAXPS Z2, Z6, Z2
	VMAXPS Z3, Z7, Z3
	ADDQ $256, SI
	SUBQ $64, CX
	JNZ  maxloop

	VMAXPS Z1, Z0, Z0
	VMAXPS Z3, Z2, Z2
	VMAXPS Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func indexEqAVX512(x []float32, v float32) int
// The first index i with x[i] == v, or -1.
TEXT ·indexEqAVX512(SB), NOSPLIT, $0-40
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	VBROADCASTSS v+24(FP), Z1
	XORQ DX, DX

eqloop:
	VCMPPS $0x00, (SI)(DX*4), Z1, K1 // EQ_OQ
	KMOVW  K1, AX
	TESTL  AX, AX
	JNZ    eqfound
	ADDQ   $16, DX
	CMPQ   DX, CX
	JB     eqloop
	MOVQ   $-1, ret+32(FP)
	VZEROUPPER
	RET

eqfound:
	BSFL AX, AX
	ADDQ DX, AX
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

// func expAVX512(dst, src []float32, m, invT, lo float32, out *lanes32)
// dst[i] = exp((src[i]-m)*invT) where that exponent is >= lo, else 0
// (NaN included). out.s1 gets 16 lane sums of dst, out.c1 16 lane counts of
// the non-zero entries (float32 sums: callers pass a chunk at a time). lo must be >= -87 so every kept value is a normal
// float32. exp is Cephes' expf: n = round(x*log2(e)), r = x - n*ln2 in two
// parts, a degree-7 polynomial for exp(r), scaled by 2^n.
TEXT ·expAVX512(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ out+64(FP), R8
	VBROADCASTSS m+48(FP), Z0
	VBROADCASTSS invT+52(FP), Z1
	VBROADCASTSS lo+56(FP), Z2
	MOVL $0x3fb8aa3b, AX // log2(e)
	VPBROADCASTD AX, Z3
	MOVL $0x3f318000, AX // ln2 hi
	VPBROADCASTD AX, Z4
	MOVL $0xb95e8083, AX // ln2 lo
	VPBROADCASTD AX, Z5
	MOVL $0x39506967, AX
	VPBROADCASTD AX, Z6
	MOVL $0x3ab743ce, AX
	VPBROADCASTD AX, Z7
	MOVL $0x3c088908, AX
	VPBROADCASTD AX, Z8
	MOVL $0x3d2aa9c1, AX
	VPBROADCASTD AX, Z9
	MOVL $0x3e2aaaaa, AX
	VPBROADCASTD AX, Z10
	MOVL $0x3f000000, AX
	VPBROADCASTD AX, Z11
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z12
	VPXORD Z13, Z13, Z13 // sums
	VPXORD Z14, Z14, Z14 // counts
	VPTERNLOGD $0xff, Z15, Z15, Z15 // all ones (-1)

exploop:
	VMOVUPS (SI), Z16
	VSUBPS  Z0, Z16, Z16
	VMULPS  Z1, Z16, Z16             // x
	VCMPPS  $0x1d, Z2, Z16, K1       // x >= lo (GE_OQ: false for NaN)
	VMAXPS  Z2, Z16, Z16             // clamp; NaN -> lo
	VMULPS  Z3, Z16, Z17
	VRNDSCALEPS $8, Z17, Z17         // n = round to nearest even
	VFNMADD231PS Z4, Z17, Z16        // r = x - n*ln2hi
	VFNMADD231PS Z5, Z17, Z16        // r -= n*ln2lo
	VMOVAPS Z6, Z18
	VFMADD213PS Z7, Z16, Z18
	VFMADD213PS Z8, Z16, Z18
	VFMADD213PS Z9, Z16, Z18
	VFMADD213PS Z10, Z16, Z18
	VFMADD213PS Z11, Z16, Z18
	VFMADD213PS Z12, Z16, Z18
	VFMADD213PS Z12, Z16, Z18
	VSCALEFPS.Z Z17, Z18, K1, Z18    // p * 2^n, 0 where not kept
	VMOVUPS Z18, (DI)
	VADDPS  Z18, Z13, Z13
	VPSUBD  Z15, Z14, K1, Z14
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  exploop

	VMOVUPS Z13, (R8)
	VMOVDQU32 Z14, 64(R8)
	VZEROUPPER
	RET

// func massCount2AVX512(x []float32, t1, t2 float32, out *massCount)
// The sums and counts of the elements >= t1 (out.s1, out.c1) and of those
// >= t2 (out.s2, out.c2). Lanes sum in float32 (callers pass at most a
// chunk), then are added in float64.
TEXT ·massCount2AVX512(SB), NOSPLIT, $0-40
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ out+32(FP), R8
	VBROADCASTSS t1+24(FP), Z0
	VBROADCASTSS t2+28(FP), Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPTERNLOGD $0xff, Z15, Z15, Z15

mcloop:
	VMOVUPS (SI), Z16
	VCMPPS $0x1d, Z0, Z16, K1
	VCMPPS $0x1d, Z1, Z16, K2
	VADDPS Z16, Z2, K1, Z2
	VPSUBD Z15, Z3, K1, Z3
	VADDPS Z16, Z4, K2, Z4
	VPSUBD Z15, Z5, K2, Z5
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ  mcloop

	// s1: 16 float32 lanes to one float64.
	VEXTRACTF64X4 $1, Z2, Y9
	VCVTPS2PD Y2, Z10
	VCVTPS2PD Y9, Z11
	VADDPD Z11, Z10, Z10
	VEXTRACTF64X4 $1, Z10, Y11
	VADDPD Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X11
	VADDPD X11, X10, X10
	VUNPCKHPD X10, X10, X11
	VADDSD X11, X10, X10
	VMOVSD X10, 0(R8)
	// s2
	VEXTRACTF64X4 $1, Z4, Y9
	VCVTPS2PD Y4, Z10
	VCVTPS2PD Y9, Z11
	VADDPD Z11, Z10, Z10
	VEXTRACTF64X4 $1, Z10, Y11
	VADDPD Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X11
	VADDPD X11, X10, X10
	VUNPCKHPD X10, X10, X11
	VADDSD X11, X10, X10
	VMOVSD X10, 8(R8)
	// c1: 16 int32 lanes to one count.
	VEXTRACTI64X4 $1, Z3, Y9
	VPADDD Y9, Y3, Y3
	VEXTRACTI128 $1, Y3, X9
	VPADDD X9, X3, X3
	VPSHUFD $0x4e, X3, X9
	VPADDD X9, X3, X3
	VPSHUFD $0xb1, X3, X9
	VPADDD X9, X3, X3
	VMOVD X3, AX
	MOVQ AX, 16(R8)
	// c2
	VEXTRACTI64X4 $1, Z5, Y9
	VPADDD Y9, Y5, Y5
	VEXTRACTI128 $1, Y5, X9
	VPADDD X9, X5, X5
	VPSHUFD $0x4e, X5, X9
	VPADDD X9, X5, X5
	VPSHUFD $0xb1, X5, X9
	VPADDD X9, X5, X5
	VMOVD X5, AX
	MOVQ AX, 24(R8)
	VZEROUPPER
	RET

// func compressAVX512(x []float32, base int32, lo, hi float32, idx *int32, val *float32) int
// Appends the elements with lo <= x[i] < hi to val and their ids
// (base+i) to idx, in order, and returns how many. Each step stores 16
// values: both outputs need 16 slots of slack past the count.
TEXT ·compressAVX512(SB), NOSPLIT, $0-64
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ idx+40(FP), R8
	MOVQ val+48(FP), DI
	MOVL base+24(FP), AX
	VPBROADCASTD AX, Z0
	VPADDD iota32<>(SB), Z0, Z0
	VBROADCASTSS lo+28(FP), Z1
	VBROADCASTSS hi+32(FP), Z2
	MOVL $16, AX
	VPBROADCASTD AX, Z3
	XORQ AX, AX

cploop:
	VMOVUPS (SI), Z4
	VCMPPS $0x1d, Z1, Z4, K1         // x >= lo
	VCMPPS $0x11, Z2, Z4, K1, K1     // and x < hi (LT_OQ)
	KORTESTW K1, K1
	JZ   cpnext                      // most steps of a narrow band keep nothing
	VCOMPRESSPS Z4, K1, Z5
	VPCOMPRESSD Z0, K1, Z6
	VMOVUPS Z5, (DI)(AX*4)
	VMOVDQU32 Z6, (R8)(AX*4)
	KMOVW K1, BX
	POPCNTL BX, BX
	ADDQ BX, AX

cpnext:
	VPADDD Z3, Z0, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ  cploop

	MOVQ AX, ret+56(FP)
	VZEROUPPER
	RET


// func bandIDsAVX512(x []float32, lo, width uint32, idx *int32) int
// Appends to idx the i with lo <= bits(x[i]) < lo+width (for non-negative
// x: lo <= x[i] < hi as floats), in order, and returns how many. One
// unsigned compare of bits(x)-lo against width; each step stores 16 ids,
// so idx needs 16 slots of slack.
TEXT ·bandIDsAVX512(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ idx+32(FP), R8
	MOVL lo+24(FP), AX
	VPBROADCASTD AX, Z1
	MOVL width+28(FP), AX
	VPBROADCASTD AX, Z2
	VMOVDQU32 iota32<>(SB), Z0
	MOVL $16, AX
	VPBROADCASTD AX, Z3
	XORQ AX, AX

bdloop:
	VMOVDQU32 (SI), Z4
	VPSUBD Z1, Z4, Z4
	VPCMPUD $1, Z2, Z4, K1 // bits-lo < width (unsigned)
	VPCOMPRESSD Z0, K1, Z5
	VMOVDQU32 Z5, (R8)(AX*4)
	KMOVW K1, BX
	POPCNTL BX, BX
	ADDQ BX, AX
	VPADDD Z3, Z0, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ  bdloop

	MOVQ AX, ret+40(FP)
	VZEROUPPER
	RET


// func maskWordsAVX512(x []float32, words []uint64)
// x[i] = -inf where bit i of words (little-endian bit order) is clear.
TEXT ·maskWordsAVX512(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), DI
	MOVQ words_base+24(FP), SI
	MOVQ words_len+32(FP), CX
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0

maskloop:
	MOVQ  (SI), AX
	NOTQ  AX
	TESTQ AX, AX
	JZ    masknext // every id of the word allowed
	KMOVW AX, K1
	VMOVUPS Z0, K1, (DI)
	SHRQ  $16, AX
	KMOVW AX, K2
	VMOVUPS Z0, K2, 64(DI)
	SHRQ  $16, AX
	KMOVW AX, K3
	VMOVUPS Z0, K3, 128(DI)
	SHRQ  $16, AX
	KMOVW AX, K4
	VMOVUPS Z0, K4, 192(DI)

masknext:
	ADDQ $8, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  maskloop
	VZEROUPPER
	RET
