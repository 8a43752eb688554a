//go:build amd64 && !purego

package cpu

// Declarations of the generated ×8 tiles of qtile8_amd64.s.

//go:noescape
func dotQ8_0x8AVX2(w *byte, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32)

//go:noescape
func dotQ4Kx8AVX2(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)

//go:noescape
func dotQ6Kx8AVX2(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)

//go:noescape
func dotQ4_0x8AVX2(w *byte, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32)

//go:noescape
func dotQ5Kx8AVX2(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)
