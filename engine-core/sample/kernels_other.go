//go:build !amd64 || purego

package sample

// haveAVX512 is false where no assembly kernels are built; the functions
// below are never called.
const haveAVX512 = false

func maxAVX512(x []float32, out *[16]float32)                         { panic("unreachable") }
func indexEqAVX512(x []float32, v float32) int                        { panic("unreachable") }
func expAVX512(dst, src []float32, m, invT, lo float32, out *lanes32) { panic("unreachable") }
func massCount2AVX512(x []float32, t1, t2 float32, out *massCount)    { panic("unreachable") }
func compressAVX512(x []float32, base int32, lo, hi float32, idx *int32, val *float32) int {
	panic("unreachable")
}

func bandIDsAVX512(x []float32, lo, width uint32, idx *int32) int { panic("unreachable") }

func maskWordsAVX512(x []float32, words []uint64) { panic("unreachable") }
