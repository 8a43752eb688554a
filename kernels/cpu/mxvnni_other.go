//go:build !amd64 || purego

package cpu

func dotMXFP4Z2x1VNNI(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Z1x2VNNI(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Z1x3VNNI(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func dotMXFP4Z1x4VNNI(w *byte, rb int, xq *int8, c *int32, xs int, xd *float32, xds int, tab *float32, nb int, n int, out *float32, os int) {
	panic("unreachable")
}

func mxfp4CorrAVX2(q *int8, n int, c16 *int16) { panic("unreachable") }

func mxfp4Corr4AVX2(q *int8, n int, c16 *int16, c32 *int32) { panic("unreachable") }
