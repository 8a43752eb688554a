//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the stored-format kernels of qdot_amd64.s may
// run: they use AVX2 and FMA, and F16C (VCVTPH2PS), which every AVX2 CPU
// has.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotQ8_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ4KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32

//go:noescape
func dotQ5KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32

//go:noescape
func dotQ6KAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int) float32
