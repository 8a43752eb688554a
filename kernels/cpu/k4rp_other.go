//go:build !amd64 || purego

package cpu

func dotQ4KRows2RAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, groups int, out *float32) {
	panic("unreachable")
}
