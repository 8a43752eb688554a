//go:build !amd64 || purego

package cpu

func dotQ4KRows2RAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, groups int, bstride int, out *float32) {
	panic("unreachable")
}

func dotQ4KTx8RAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}

func dotQ4KTx16RAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}

func dotQ4KTxNRAVX2(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int) {
	panic("unreachable")
}
