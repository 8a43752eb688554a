//go:build !amd64 || purego

package cpu

func q6kUnpackAVX2(w *byte, rb int, rows int, nb int, u *byte, ud *float32, pf int) {
	panic("unreachable")
}

func dotQ6Kx8RAVX2(u *byte, ud *float32, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, rows int, st *float32) {
	panic("unreachable")
}
