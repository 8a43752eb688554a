//go:build !amd64 || purego

package cpu

func dotQ8_0RowsPfAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ4_0RowsPfAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ4_0RowsQuadAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}
