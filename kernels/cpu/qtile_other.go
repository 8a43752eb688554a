//go:build !amd64 || purego

package cpu

func dotQ4_0x4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, nb int, out *[4]float32) {
	panic("unreachable")
}
