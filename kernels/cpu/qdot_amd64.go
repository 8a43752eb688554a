//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the stored-format kernels of qdot_amd64.s may
// run: they use AVX2 and FMA, and F16C (VCVTPH2PS), which every AVX2 CPU
// has.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotQ8_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ4KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32

//go:noescape
func dotQ5KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32

//go:noescape
func dotQ6KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32

//go:noescape
func quantActAVX2(x *float32, q *int8, d *float32, bs *int16, nblk int, blk int)

//go:noescape
func tileF16AVX2(w *byte, ws int, x *float32, xs int, n int, out *[8]float32)

//go:noescape
func tileBF16AVX2(w *byte, ws int, x *float32, xs int, n int, out *[8]float32)

//go:noescape
func dotQ4Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)

//go:noescape
func dotQ6Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)

//go:noescape
func dotQ5Kx4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, bs *int16, bss int, nb int, out *[4]float32)

//go:noescape
func dotQ8_0x4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, nb int, out *[4]float32)

//go:noescape
func dotQ4KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)

//go:noescape
func dotQ6KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)

//go:noescape
func dotQ8_0RowsAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)

//go:noescape
func dotF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32)

//go:noescape
func dotQ5KRowsAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)

//go:noescape
func dotBF16RowsAVX2(w *byte, x *float32, n int, rows int, out *float32)
