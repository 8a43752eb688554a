//go:build amd64 && !purego

package cpu

// Declaration of the AVX-512 VNNI Q6_K tile on transposed super-blocks,
// q6v_amd64.s.

//go:noescape
func dotQ6KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bs *int16, bsr int, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)
