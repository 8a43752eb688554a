//go:build !amd64 || purego

package cpu

func dotQ6KTx16KV(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int) {
	panic("unreachable")
}
