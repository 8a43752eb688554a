package gguf

import (
	"encoding/binary"
	"math"

	"github.com/sluice-llm/sluice/quant"
)

// EncodeF32 returns xs as little-endian F32 tensor data.
func EncodeF32(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// EncodeF16 returns xs as little-endian F16 tensor data (round to nearest
// even, as ggml's FP32→FP16 conversion).
func EncodeF16(xs []float32) []byte {
	out := make([]byte, 2*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint16(out[2*i:], quant.F32ToF16(x))
	}
	return out
}
