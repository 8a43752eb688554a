//go:build !amd64 || purego

package cpu

func dotQ6KRowsRegAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ5KRowsPfAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}
