//go:build !amd64 || purego

package cpu

func halfToF32F16AVX2(src *byte, dst *float32, n int)  { panic("unreachable") }
func halfToF32BF16AVX2(src *byte, dst *float32, n int) { panic("unreachable") }
func halfPanelAVX2(wn int, xp *float32, w *float32, ws int, k int, acc *float32) {
	panic("unreachable")
}
func halfPanelWidenAVX2(bf16 bool, wn int, xp *float32, w *byte, ws int, k int, acc *float32, buf *float32) {
	panic("unreachable")
}
func packPanel8AVX2(x *float32, xs int, k int, xp *float32) { panic("unreachable") }
