//go:build !amd64 || purego

package cpu

func q8zPrep(w *byte, ws int, nb int, corr *int32) { panic("unreachable") }

func dotQ8_0x4x16TVNNI(w *byte, ws int, pf *byte, xt *uint8, xd16 *float32, corr *int32, nb int, out *float32, os int, acc *float32, mode int) {
	panic("unreachable")
}

func q4zPrep(w *byte, ws int, nb int, scr *byte) { panic("unreachable") }

func dotQ4_0x4x16TVNNI(scr *byte, pf *byte, ps int, xt *uint8, xd16 *float32, s16 *int32, nb int, out *float32, os int, acc *float32, mode int) {
	panic("unreachable")
}

func transposeQ16Z(src *int8, k int, nc int, dst *uint8) { panic("unreachable") }
