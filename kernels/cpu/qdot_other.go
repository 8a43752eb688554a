//go:build !amd64 || purego

package cpu

// hasAVX2 is false: the AVX2 kernels exist only on amd64 without purego.
const hasAVX2 = false

func dotF16AVX2(w *byte, x *float32, n int) float32                        { panic("unreachable") }
func dotBF16AVX2(w *byte, x *float32, n int) float32                       { panic("unreachable") }
func dotQ8_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32           { panic("unreachable") }
func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32           { panic("unreachable") }
func dotQ4KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32 { panic("unreachable") }
func dotQ5KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32 { panic("unreachable") }
func dotQ6KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32 { panic("unreachable") }
