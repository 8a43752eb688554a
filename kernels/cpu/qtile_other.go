//go:build !amd64 || purego

package cpu

func dotQ4_0x4AVX2(w *byte, xq *int8, xs int, xd *float32, xds int, nb int, out *[4]float32) {
	panic("unreachable")
}

func wsumF16AVX2(w *float32, v *uint16, stride int, n int, hd int, out *float32) {
	panic("unreachable")
}
