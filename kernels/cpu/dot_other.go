//go:build !amd64 || purego

package cpu

const hasAVX512 = false

func dot4x4AVX512(x *float32, xs int, w *float32, ws int, k int, out *[16]float32) {
	panic("unreachable")
}
func dot1x4AVX512(x *float32, w *float32, ws int, k int, out *[4]float32) { panic("unreachable") }
func dotq8x4AVX512(x *float32, w *byte, ws int, nblk int, out *[4]float32) {
	panic("unreachable")
}
func dotAVX512(a, b *float32, k int) float32     { panic("unreachable") }
func axpyAVX512(a float32, x, y *float32, k int) { panic("unreachable") }

func dequantQ8AVX512(dst *float32, src *byte, nblk int) { panic("unreachable") }

func scoresAVX512(q *float32, k *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumAVX512(w *float32, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}

func dotq8sx4AVX512(x *float32, w *byte, ws int, s *float32, ss int, nblk int, out *[4]float32) {
	panic("unreachable")
}

const hasVNNI = false

func dotq8q8x4AVX512(xq *int8, xd *float32, w *byte, ws int, s *float32, ss int, nblk int, out *[4]float32) {
	panic("unreachable")
}

func panel6AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel4AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel2AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}
func panel1AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}

func prefetchRowsAVX512(p uintptr, stride int, n int, bytes int) { panic("unreachable") }

func prefetchRowsL2AVX512(p uintptr, stride int, n int, bytes int) { panic("unreachable") }

func expSubSumAVX512(x *float32, n int, sub float32) float32  { panic("unreachable") }
func siluMulAVX512(dst, gate, up *float32, n int)             { panic("unreachable") }
func scaleMaxAVX512(x *float32, n int, scale float32) float32 { panic("unreachable") }
func scaleMulAVX512(dst, x, w *float32, n int, s float32)     { panic("unreachable") }
func wsum64AVX512(w *float32, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func scores4AVX512(q *float32, k *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}

func panel6pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}

func panel4pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}

func panel2pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}

func panel1pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int) {
	panic("unreachable")
}

func f32ToF16AVX512(dst *uint16, src *float32, n int) { panic("unreachable") }
func scores4F16AVX512(q *float32, k *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsum64F16AVX512(w *float32, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
