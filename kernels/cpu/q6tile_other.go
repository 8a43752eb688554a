//go:build !amd64 || purego

package cpu

func q6kUnpackAVX2(w *byte, rb int, rows int, nb int, u *byte, ud *float32) {
	panic("unreachable")
}

func dotQ6Kx8SAVX2(u *byte, ud *float32, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32) {
	panic("unreachable")
}
