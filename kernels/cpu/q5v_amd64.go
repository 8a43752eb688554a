//go:build amd64 && !purego

package cpu

// Declaration of the AVX-512 VNNI Q5_K ×8 tile, q5v_amd64.s.

//go:noescape
func dotQ5Kx8VNNI(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32)

// dotQ5KTxNVNNI is the Q5_K tile on transposed super-blocks for pairs of
// weight rows (rows even), q5v_amd64.s.
//
//go:noescape
func dotQ5KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)

// dotQ5KTxNKV is dotQ4KTxNVNNI's tile (any number of weight rows, the
// activations in actQ.kv's layout) on Q5_K weight rows in the file's
// layout, q5v_amd64.s; it needs AVX512_VBMI (hasK4V).
//
//go:noescape
func dotQ5KTxNKV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)

// dotQ5KTx16KV is dotQ4KTx16VNNI (two groups of 8 activation rows, any
// number of weight rows, accumulators in registers) on Q5_K weight rows
// in the file's layout, q5v_amd64.s; it needs AVX512_VBMI (hasK4V).
//
//go:noescape
func dotQ5KTx16KV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)

// dotQ5KTx8KV is dotQ5KTx16KV for one group of 8 activation rows.
//
//go:noescape
func dotQ5KTx8KV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)
