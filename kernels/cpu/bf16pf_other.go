//go:build !amd64 || purego

package cpu

func halfPanelBF16PfAVX2(wn int, xp *float32, w *byte, ws int, k int, acc *float32, buf *float32) {
	panic("unreachable")
}
