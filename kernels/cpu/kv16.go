package cpu

import (
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// F16 KV cache. With Options.KVF16 the backend's AllocKV makes half-width
// cache tensors: WriteKV rounds keys and values to float16 (to nearest
// even) and attention widens them on load (kv16_amd64.s, attn2_amd64.s), which halves the
// memory a decode step's attention reads — at 16 sequences of a few hundred
// positions as much as a fifth of the step — for a relative error of about
// 2⁻¹¹ per cached element (llama.cpp's default KV type). As ggml's mul_mat
// converts its F32 operand to the F16 one's type, attention over an F16
// cache also rounds the query (before q·k) and the softmax probabilities
// (before p·v) to float16 (see attnTask.run and softmaxF16Sink).

// AllocKV makes a zeroed KV-cache tensor: F16 with Options.KVF16, else F32.
// It takes the cache from the backend's huge-page arena (huge_linux.go)
// where it can: attention reads a KV head's rows kvDim elements apart
// over blocks anywhere in the cache, one 4 KiB page per 2–8 positions, so
// that with 4 KiB pages a long context's attention walks the page tables
// for most of the lines it reads (and its prefetches stall on the walks).
// In 2 MiB pages the tables of a 4096-position context fit the TLB.
func (b *Backend) AllocKV(rows, cols int) kernels.Tensor {
	n := rows * cols
	if !b.kvF16 {
		if f := b.kvArena(4 * n); f != nil {
			return &kernels.Host{R: rows, C: cols, DT: kernels.F32, F: unsafe.Slice((*float32)(unsafe.Pointer(&f[0])), n)}
		}
		return b.Alloc(rows, cols)
	}
	if h := b.kvArena(2 * n); h != nil {
		return &kernels.Host{R: rows, C: cols, DT: kernels.F16, H: unsafe.Slice((*uint16)(unsafe.Pointer(&h[0])), n)}
	}
	return &kernels.Host{R: rows, C: cols, DT: kernels.F16, H: make([]uint16, n)}
}

// kvArena returns n zeroed bytes for a cache tensor from the huge-page
// arena, or nil (Options.HeapKV, n = 0, no huge pages: the caller then
// allocates from the Go heap).
func (b *Backend) kvArena(n int) []byte {
	if b.heapKV || n <= 0 {
		return nil
	}
	return b.huge.alloc(n)
}

// KVElemBytes is 2 with Options.KVF16, else 4.
func (b *Backend) KVElemBytes() int {
	if b.kvF16 {
		return 2
	}
	return 4
}

// f32ToF16 sets dst[i] = float16(src[i]).
func (k kern) f32ToF16(dst []uint16, src []float32) {
	n16 := 0
	if k.simd {
		n16 = len(src) &^ 15
		if n16 > 0 {
			_ = dst[n16-1]
			f32ToF16AVX512(&dst[0], &src[0], n16)
		}
	} else if k.avx2 {
		n16 = len(src) &^ 7
		if n16 > 0 {
			_ = dst[n16-1]
			f32ToF16AVX2(&dst[0], &src[0], n16)
		}
	}
	for i := n16; i < len(src); i++ {
		dst[i] = quant.F32ToF16(src[i])
	}
}

// scoresH is scores over F16 keys.
func (k kern) scoresH(q []float32, kc []uint16, stride int, out []float32) {
	hd, n := len(q), len(out)
	if n == 0 {
		return
	}
	_ = kc[(n-1)*stride+hd-1]
	p := 0
	if k.simd && hd%16 == 0 {
		p = n &^ 3
		if p > 0 {
			scores4F16AVX512(&q[0], &kc[0], stride, p, hd, &out[0])
		}
	} else if k.avx2 && hd%8 == 0 {
		p = n &^ 3
		if p > 0 {
			scores4F16AVX2(&q[0], &kc[0], stride, p, hd, &out[0])
		}
		if p < n {
			scores1F16AVX2(&q[0], &kc[p*stride], stride, n-p, hd, &out[p])
			return
		}
	}
	for ; p < n; p++ {
		row := kc[p*stride : p*stride+hd]
		var s float32
		for d, v := range q {
			s += v * quant.F16ToF32(row[d])
		}
		out[p] = s
	}
}

// wsumH is wsum over F16 values.
func (k kern) wsumH(w []float32, v []uint16, stride int, out []float32) {
	hd, n := len(out), len(w)
	if n == 0 {
		return
	}
	_ = v[(n-1)*stride+hd-1]
	if k.simd && hd%64 == 0 {
		wsum64F16AVX512(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	if k.avx2 && hd%64 == 0 {
		wsum64F16AVX2(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	if k.avx2 && hd%32 == 0 {
		wsum32F16AVX2(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	for p, wp := range w {
		row := v[p*stride : p*stride+hd]
		for d := range out {
			out[d] += wp * quant.F16ToF32(row[d])
		}
	}
}

// prefetchRowsH is prefetchRows over an F16 cache.
func (k kern) prefetchRowsH(c []uint16, at, stride, n, hd int) {
	if !(k.simd || k.avx2) || n <= 0 || hd%16 != 0 {
		return
	}
	_ = c[at+(n-1)*stride+hd-1]
	prefetchRowsL2AVX512(uintptr(unsafe.Pointer(&c[at])), stride*2, n, hd*2)
}
