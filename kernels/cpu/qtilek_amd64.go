//go:build amd64 && !purego

package cpu

// Declaration of the Q4_K ×8 tile of qtilek_amd64.s.

//go:noescape
func dotQ4Kx8PAVX2(w *byte, xq *int8, xs int, xd8 *float32, bp *int16, nb int, out *[8]float32)

//go:noescape
func q4kScalesAVX2(w *byte, rb int, rows int, nb int, sc *byte)

//go:noescape
func dotQ4Kx8SAVX2(w *byte, xq *int8, xs int, xd8 *float32, bp *int16, sc *byte, nb int, out *[8]float32)
