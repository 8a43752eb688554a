package cpu

import (
	"github.com/sluice-llm/sluice/quant"
)

// Attention over an F16 cache in ggml's summation order (machines without
// AVX-512, whose attention kernels are the plain-Go ones anyway).
//
// llama.cpp computes attention as two matrix products with F16 operands:
// k·q (the query rounded to float16) and v·p (the probabilities rounded to
// float16). Products of two float16 values are exact in float32, so only
// the order of the float32 additions decides the last bits, and ggml uses
// one of two orders on x86 with AVX2:
//
//   - a step of a single row (decode, one token in the batch):
//     ggml_vec_dot_f16, 4 accumulators of 8 lanes over chunks of 32
//     elements (element e in accumulator (e mod 32)/8, lane e mod 8),
//     reduced as lane l: (s0+s2)+(s1+s3), then (x0+x4)+(x1+x5) and
//     (x2+x6)+(x3+x7), added; elements past the last full 32 added in
//     float64;
//   - a batch of rows (prefill): llamafile's tinyBLAS, one accumulator of 8
//     lanes (element e in lane e mod 8) reduced as
//     ((c0+c4)+(c2+c6)) + ((c1+c5)+(c3+c7)); lengths not a multiple of 8
//     fall back to the first order.
//
// For v·p the elements are the positions, whose lanes follow the position
// index (llama.cpp's cache cell of a single sequence); masked or padded
// positions add zeros, which change no sum.

// dotF16Order returns q · (an F16 row of len(q) values) in ggml's order
// (batched: tinyBLAS, else ggml_vec_dot_f16).
func dotF16Order(q []float32, k []uint16, batched bool) float32 {
	n := len(q)
	k = k[:n]
	if batched && n%8 == 0 {
		var c [8]float32
		for i := 0; i < n; i += 8 {
			for l := 0; l < 8; l++ {
				c[l] += q[i+l] * quant.F16ToF32(k[i+l])
			}
		}
		return hsum8(&c)
	}
	var s [32]float32
	np := n &^ 31
	for i := 0; i < np; i += 32 {
		for e := 0; e < 32; e++ {
			s[e] += q[i+e] * quant.F16ToF32(k[i+e])
		}
	}
	r := float64(reduce32(&s))
	for e := np; e < n; e++ {
		r += float64(q[e] * quant.F16ToF32(k[e]))
	}
	return float32(r)
}

// hsum8 reduces 8 lanes as ggml's hsum_float_8 (and tinyBLAS's hsum).
func hsum8(c *[8]float32) float32 {
	return ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]))
}

// reduce32 reduces ggml_vec_dot_f16's 4×8 accumulators (s[8j+l]) as
// GGML_F32Cx8_REDUCE.
func reduce32(s *[32]float32) float32 {
	var x [8]float32
	for l := range x {
		x[l] = (s[l] + s[16+l]) + (s[8+l] + s[24+l])
	}
	return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]))
}

// wsumF16Order sets out[d] = Σ_pos p[pos]·v[slot(pos)·stride+off+d] in
// ggml's order for v·p: per output column the positions fall into lanes
// by index (32 lanes, or 8 when batched), accumulated in part
// (lanes×len(out) floats) and reduced as dotF16Order does. Position pos
// lives in cache slot table[pos/bs]·bs + pos%bs.
func wsumF16Order(p []float32, v []uint16, table []int32, bs, stride, off int, out, part []float32, batched bool) {
	wsumF16OrderFrom(p, v, table, bs, stride, stride, off, 0, out, part, batched)
}

// wsumF16OrderFrom is wsumF16Order over the positions [first,
// first+len(p)): p[i] weighs position first+i (a sliding window), in a
// cache of stride columns laid out in chunks of cw (kvAt).
func wsumF16OrderFrom(p []float32, v []uint16, table []int32, bs, stride, cw, off, first int, out, part []float32, batched bool) {
	hd := len(out)
	lanes := 32
	if batched {
		lanes = 8 // llama.cpp's n_kv is a multiple of 32, so tinyBLAS takes it
	}
	part = part[:lanes*hd]
	clear(part)
	for i, w := range p {
		pos := first + i
		row := v[kvAt(int(table[pos/bs])*bs+pos%bs, bs, stride, cw, off):][:hd]
		acc := part[(i%lanes)*hd:][:hd]
		for d, h := range row {
			acc[d] += w * quant.F16ToF32(h)
		}
	}
	for d := range out {
		if lanes == 8 {
			var c [8]float32
			for l := range c {
				c[l] = part[l*hd+d]
			}
			out[d] = hsum8(&c)
			continue
		}
		var s [32]float32
		for l := range s {
			s[l] = part[l*hd+d]
		}
		out[d] = reduce32(&s)
	}
}
