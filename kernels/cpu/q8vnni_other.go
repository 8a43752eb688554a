//go:build !amd64 || purego

package cpu

func dotQ8_0x8VNNI(w *byte, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32) {
	panic("unreachable")
}

func dotQ4_0x8VNNI(w *byte, xq *int8, xs int, xd8 *float32, s8 *int32, nb int, out *[8]float32) {
	panic("unreachable")
}

func dotQ8_0x2x4VNNI(w *byte, ws int, xq *int8, xs int, xd8 *float32, nb int, out *[8]float32) {
	panic("unreachable")
}

func dotQ8_0x8TVNNI(w *byte, xt *uint8, xd8 *float32, nb int, out *[8]float32) {
	panic("unreachable")
}

func dotQ8_0x2x8TVNNI(w *byte, ws int, xt *uint8, xd8 *float32, nb int, out *[16]float32) {
	panic("unreachable")
}

func dotQ4_0x8TVNNI(w *byte, xt *uint8, xd8 *float32, s8 *int32, nb int, out *[8]float32) {
	panic("unreachable")
}
