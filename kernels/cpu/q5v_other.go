//go:build !amd64 || purego

package cpu

func dotQ5Kx8VNNI(w *byte, xq *int8, xs int, xd8 *float32, bs *int16, bss int, nb int, out *[8]float32) {
	panic("unreachable")
}

func dotQ5KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int) {
	panic("unreachable")
}

func dotQ5KTxNKV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int) {
	panic("unreachable")
}

func dotQ5KTx16KV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}

func dotQ5KTx8KV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}
