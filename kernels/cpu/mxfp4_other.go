//go:build !amd64 || purego

package cpu

func dotMXFP4RowsAVX2(w *byte, xq *int8, c *int16, ts *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotMXFP4RowsMulAVX2(w *byte, xq *int8, c *int16, xd *float32, tab *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}

func mxfp4ScaleTabAVX2(tab *float32, xd *float32, nb int, out *float32) {
	panic("unreachable")
}

func dotMXFP4x4AVX2(w *byte, xq *int8, c *int16, xs int, xd *float32, xds int, tab *float32, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotMXFP4x3AVX2(w *byte, xq *int8, c *int16, xs int, xd *float32, xds int, tab *float32, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotMXFP4x2AVX2(w *byte, xq *int8, c *int16, xs int, xd *float32, xds int, tab *float32, nb int, out *[4]float32) {
	panic("unreachable")
}
