//go:build !amd64 || purego

package cpu

func halfTileAVX2(bf16 bool, m, wn int, w *byte, ws int, x *float32, xs int, n int, out *float32, os int) bool {
	panic("unreachable")
}
