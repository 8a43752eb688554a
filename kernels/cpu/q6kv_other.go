//go:build !amd64 || purego

package cpu

func dotQ6KTx16KVS(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, acc *float32, gs int, ss int, n int, mode int) {
	panic("unreachable")
}
