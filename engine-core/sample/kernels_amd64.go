//go:build !purego

package sample

import "golang.org/x/sys/cpu"

// haveAVX512 selects the assembly kernels. It is fixed at start-up from
// the CPU's features (AVX-512 F with OS support, and POPCNT).
var haveAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasPOPCNT

// maxAVX512 stores the 16 lane maxima of x (len a positive multiple of 64)
// in out, NaNs ignored.
//
//go:noescape
func maxAVX512(x []float32, out *[16]float32)

// indexEqAVX512 returns the first i with x[i] == v, or -1; len(x) is a
// positive multiple of 16.
//
//go:noescape
func indexEqAVX512(x []float32, v float32) int

// expAVX512 writes dst[i] = exp((src[i]-m)*invT), or 0 where that
// exponent is below lo or NaN; out.s1 and out.c1 get the lane sums and
// counts of the kept values. len(src) is a positive multiple of 16, dst at
// least as long, lo >= expLo.
//
//go:noescape
func expAVX512(dst, src []float32, m, invT, lo float32, out *lanes32)

// massCount2AVX512 fills out with the sums and counts of the elements of
// x >= t1 (s1, c1) and >= t2 (s2, c2); len(x) is a positive multiple of
// 16 (and at most a chunk: lanes sum in float32).
//
//go:noescape
func massCount2AVX512(x []float32, t1, t2 float32, out *massCount)

// compressAVX512 writes the elements with lo <= x[i] < hi to val and
// base+i to idx, in order, and returns their number; len(x) is a positive
// multiple of 16 and both outputs have room for that number plus 16.
//
//go:noescape
func compressAVX512(x []float32, base int32, lo, hi float32, idx *int32, val *float32) int

// bandIDsAVX512 writes the i with lo <= bits(x[i]) < lo+width (unsigned)
// to idx, in order, and returns their number; len(x) is a positive
// multiple of 16 and idx has room for that number plus 16.
//
//go:noescape
func bandIDsAVX512(x []float32, lo, width uint32, idx *int32) int

// maskWordsAVX512 sets x[i] = -inf where bit i%64 of words[i/64] is
// clear; len(x) is 64*len(words), len(words) > 0. All-ones words are
// skipped; the others cost four masked stores.
//
//go:noescape
func maskWordsAVX512(x []float32, words []uint64)
