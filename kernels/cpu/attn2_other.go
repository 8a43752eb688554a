//go:build !amd64 || purego

package cpu

func f32ToF16AVX2(dst *uint16, src *float32, n int) { panic("unreachable") }
func dotAVX2(a, b *float32, n int) float32          { panic("unreachable") }
func scores4AVX2(q *float32, k *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func scores1AVX2(q *float32, k *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func scores4F16AVX2(q *float32, k *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func scores1F16AVX2(q *float32, k *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsum64AVX2(w *float32, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsum32AVX2(w *float32, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsum64F16AVX2(w *float32, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsum32F16AVX2(w *float32, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func expSubSumAVX2(x *float32, n int, sub float32) float32  { panic("unreachable") }
func siluMulAVX2(dst, gate, up *float32, n int)             { panic("unreachable") }
func scaleMaxAVX2(x *float32, n int, scale float32) float32 { panic("unreachable") }
