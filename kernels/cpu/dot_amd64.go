//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// hasAVX512 reports whether the AVX-512 kernels of dot_amd64.s may run:
// they use AVX512F, BW (word broadcast) and VL (narrow EVEX forms) and F16C.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasFMA

//go:noescape
func dot4x4AVX512(x *float32, xs int, w *float32, ws int, k int, out *[16]float32)

//go:noescape
func dot1x4AVX512(x *float32, w *float32, ws int, k int, out *[4]float32)

//go:noescape
func dotq8x4AVX512(x *float32, w *byte, ws int, nblk int, out *[4]float32)

//go:noescape
func dotAVX512(a, b *float32, k int) float32

//go:noescape
func axpyAVX512(a float32, x, y *float32, k int)

//go:noescape
func dequantQ8AVX512(dst *float32, src *byte, nblk int)

//go:noescape
func scoresAVX512(q *float32, k *float32, stride int, n int, hd int, out *float32)

//go:noescape
func wsumAVX512(w *float32, v *float32, stride int, n int, hd int, out *float32)

//go:noescape
func dotq8sx4AVX512(x *float32, w *byte, ws int, s *float32, ss int, nblk int, out *[4]float32)

// hasVNNI reports whether dotq8q8x4AVX512 may run: it adds AVX512_VNNI's
// VPDPBUSD (256-bit, so VL) to the AVX-512 set.
var hasVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI

//go:noescape
func dotq8q8x4AVX512(xq *int8, xd *float32, w *byte, ws int, s *float32, ss int, nblk int, out *[4]float32)

// Panel kernels (panel_amd64.s, see panel.go): R rows × 64 columns.

//go:noescape
func panel6AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel4AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel2AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel1AVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel6pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel4pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel2pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

//go:noescape
func panel1pfAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

// exp_amd64.s

//go:noescape
func expSubSumAVX512(x *float32, n int, sub float32) float32

//go:noescape
func siluMulAVX512(dst, gate, up *float32, n int)

//go:noescape
func scaleMaxAVX512(x *float32, n int, scale float32) float32

// scaleMulAVX512 sets dst[i] = (x[i]·s)·w[i] for i < n, a multiple of 16.
//
//go:noescape
func scaleMulAVX512(dst, x, w *float32, n int, s float32)

//go:noescape
func wsum64AVX512(w *float32, v *float32, stride int, n int, hd int, out *float32)

//go:noescape
func scores4AVX512(q *float32, k *float32, stride int, n int, hd int, out *float32)

// kv16_amd64.s

//go:noescape
func f32ToF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func scores4F16AVX512(q *float32, k *uint16, stride int, n int, hd int, out *float32)

//go:noescape
func wsum64F16AVX512(w *float32, v *uint16, stride int, n int, hd int, out *float32)
