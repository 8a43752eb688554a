//go:build !amd64 || purego

package cpu

const hasK4V = false

func dotQ4KTx8VNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}

func dotQ4KTx16VNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}

func dotQ4KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int) {
	panic("unreachable")
}

func transposeKVAVX512(q *int8, dst *int8, nb int, ss int) {
	panic("unreachable")
}
