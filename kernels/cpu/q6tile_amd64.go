//go:build amd64 && !purego

package cpu

// Declarations of the Q6_K ×8 tile on unpacked rows of q6tile_amd64.s.

//go:noescape
func q6kUnpackAVX2(w *byte, rb int, rows int, nb int, u *byte, ud *float32, pf int)

//go:noescape
func dotQ6Kx8RAVX2(u *byte, ud *float32, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, rows int, st *float32)
