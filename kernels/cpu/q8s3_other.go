//go:build !amd64 || purego

package cpu

func dotQ8_0Rows3AVX2(w *byte, xq *int8, xd *float32, nb int, groups int, out *float32) {
	panic("unreachable")
}
