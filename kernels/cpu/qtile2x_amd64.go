//go:build amd64 && !purego

package cpu

// Declaration of the generated 2×4 Q4_K tile of qtile2x_amd64.s.

//go:noescape
func dotQ4Kx2x4AVX2(w *byte, ws int, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)
