//go:build !amd64 || purego

package cpu

func dotQ5KRowsVNNI(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ5KRows2SVNNI(w *byte, xq *int8, xd *float32, bs *int16, nb int, groups int, out *float32) {
	panic("unreachable")
}

func dotQ6KRowsVNNI(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ6KRows2SVNNI(w *byte, xq *int8, xd *float32, bs *int16, nb int, groups int, out *float32) {
	panic("unreachable")
}
