//go:build !amd64 || purego

package cpu

func dotQ4KTxNAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int) {
	panic("unreachable")
}
