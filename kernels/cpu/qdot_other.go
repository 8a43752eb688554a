//go:build !amd64 || purego

package cpu

// hasAVX2 is false: the AVX2 kernels exist only on amd64 without purego.
const hasAVX2 = false

func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32 { panic("unreachable") }

func quantActAVX2(x *float32, q *int8, d *float32, bs *int16, nblk int, blk int) {
	panic("unreachable")
}

func dotQ4Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotQ6Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotQ5Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotQ8_0x4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, nb int, out *[4]float32) {
	panic("unreachable")
}

func dotQ4KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ6KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotQ8_0RowsAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32) { panic("unreachable") }

func dotQ5KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
	panic("unreachable")
}

func dotBF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32) { panic("unreachable") }
