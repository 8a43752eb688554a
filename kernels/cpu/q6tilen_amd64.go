//go:build amd64 && !purego

package cpu

// Declaration of the Q6_K tile on transposed super-blocks for any number
// of groups of 8 rows, q6tilen_amd64.s.

//go:noescape
func dotQ6KTxNAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bs *int16, bsr int, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)

// transposeKAVX2 transposes one activation row's nb super-blocks into
// actQ.kt's layout (super-blocks ss bytes apart), as transposeK does.
//
//go:noescape
func transposeKAVX2(src *int8, dst *int8, nb int, ss int)
