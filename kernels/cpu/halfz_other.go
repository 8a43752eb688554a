//go:build !amd64 || purego

package cpu

// halfZMaxW1 and halfZMaxW2 mirror halfz_amd64.go (no AVX-512 kernels here).
const (
	halfZMaxW1 = 16
	halfZMaxW2 = 12
)

func halfPanelZAVX512(p, wn int, xp *float32, xps int, w *float32, ws int, k int, acc *float32, accs int) {
	panic("unreachable")
}

func halfPanelZWidenAVX512(bf16 bool, wn int, xp *float32, w *byte, ws int, k int, acc *float32, buf *float32) {
	panic("unreachable")
}

func halfPanelSumsAVX512(out *float32, oc int, a0, a1 *float32, r int) { panic("unreachable") }
