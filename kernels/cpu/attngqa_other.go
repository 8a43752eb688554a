//go:build !amd64 || purego

package cpu

func scoresG2AVX2(q *float32, k *float32, stride int, n int, hd int, out *float32, os int) {
	panic("unreachable")
}
func scoresG4AVX2(q *float32, k *float32, stride int, n int, hd int, out *float32, os int) {
	panic("unreachable")
}
func scoresG2F16AVX2(q *float32, k *uint16, stride int, n int, hd int, out *float32, os int) {
	panic("unreachable")
}
func scoresG4F16AVX2(q *float32, k *uint16, stride int, n int, hd int, out *float32, os int) {
	panic("unreachable")
}
func wsumG2AVX2(w *float32, ws int, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG4AVX2(w *float32, ws int, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG2F16AVX2(w *float32, ws int, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG4F16AVX2(w *float32, ws int, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG2AVX512(w *float32, ws int, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG4AVX512(w *float32, ws int, v *float32, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG2F16AVX512(w *float32, ws int, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
func wsumG4F16AVX512(w *float32, ws int, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
