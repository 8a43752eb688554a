//go:build !amd64 || purego

package cpu

func dotMXFP4Tab1x2AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Tab1x3AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Tab1x4AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Tab2x2AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Tab2x3AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Tab2x4AVX2(w *byte, rb int, xq *int8, c *int16, xs int, ts *float32, tss int, nb int, n int, out *float32, os int) {
	panic("unreachable")
}
