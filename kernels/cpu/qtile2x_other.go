//go:build !amd64 || purego

package cpu

func dotQ4Kx2x4AVX2(w *byte, ws int, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32) {
	panic("unreachable")
}
