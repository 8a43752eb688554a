//go:build amd64 && !purego

package cpu

// Declarations of the Q4_K tiles on transposed super-blocks of
// qtilekt_amd64.s.

//go:noescape
func dotQ4KTx8AVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)

//go:noescape
func dotQ4KTx16AVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)
