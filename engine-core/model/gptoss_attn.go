package model

import (
	"math"

	"github.com/sluice-llm/sluice/kernels"
)

// This file holds references for gpt-oss's attention details that the
// other architectures lack: YaRN rotary frequencies and attention with
// learned sinks over a sliding window. They are plain float code, written
// from Hugging Face transformers' _compute_yarn_parameters and gpt-oss's
// reference sdpa (gpt_oss/torch/model.py), for the forward pass to be
// checked against once gpt-oss is wired into loading.

// YaRN is a "yarn" rope_scaling entry of config.json.
type YaRN struct {
	// Factor is the context extension factor (gpt-oss: 32).
	Factor float64
	// OriginalMaxPos is original_max_position_embeddings (gpt-oss: 4096).
	OriginalMaxPos int
	// BetaFast and BetaSlow bound the frequency ramp in rotations
	// (defaults 32 and 1).
	BetaFast, BetaSlow float64
	// Truncate rounds the ramp's ends to whole dimensions (transformers'
	// default true; gpt-oss's config sets false).
	Truncate bool
	// AttentionFactor overrides the cos/sin scale when non-zero.
	AttentionFactor float64
}

// InvFreq returns YaRN's inverse frequencies for headDim and rope base, and
// the factor that scales cos and sin (gpt-oss's "concentration": 0.1·ln(factor)+1).
func (y YaRN) InvFreq(headDim int, base float64) (inv []float64, attnFactor float64) {
	betaFast, betaSlow := y.BetaFast, y.BetaSlow
	if betaFast == 0 {
		betaFast = 32
	}
	if betaSlow == 0 {
		betaSlow = 1
	}
	attnFactor = y.AttentionFactor
	if attnFactor == 0 {
		attnFactor = 1
		if y.Factor > 1 {
			attnFactor = 0.1*math.Log(y.Factor) + 1
		}
	}
	dim := float64(headDim)
	// The dimension whose wavelength makes numRot turns over the original
	// context.
	corrDim := func(numRot float64) float64 {
		return dim * math.Log(float64(y.OriginalMaxPos)/(numRot*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := corrDim(betaFast), corrDim(betaSlow)
	if y.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, dim-1)
	if low == high {
		high += 0.001
	}
	half := headDim / 2
	inv = make([]float64, half)
	for j := range inv {
		posFreq := math.Pow(base, float64(2*j)/dim)
		extrap, interp := 1/posFreq, 1/(y.Factor*posFreq)
		ramp := math.Min(math.Max((float64(j)-low)/(high-low), 0), 1)
		extrapFactor := 1 - ramp
		inv[j] = interp*(1-extrapFactor) + extrap*extrapFactor
	}
	return inv, attnFactor
}

// SinkAttention computes one query head's attention for the query at
// position pos over keys and values at positions [0, pos] (row-major
// [≥pos+1 × headDim]): scores q·k·scale, limited to the last window
// positions (pos-window < j ≤ pos) when window > 0, softmaxed together with
// the head's learned sink logit, which takes probability mass but adds no
// value. scores needs pos+1 floats. This is gpt-oss's attention per head;
// without a sink (sink = -Inf) and window it is ordinary causal attention.
func SinkAttention(out, q, k, v []float32, pos, headDim, window int, sink, scale float32, scores []float32) {
	first := 0
	if window > 0 {
		first = max(pos-window+1, 0)
	}
	mx := sink
	for j := first; j <= pos; j++ {
		s := kernels.Dot(q[:headDim], k[j*headDim:(j+1)*headDim]) * scale
		scores[j] = s
		mx = max(mx, s)
	}
	sum := float32(math.Exp(float64(sink - mx)))
	for j := first; j <= pos; j++ {
		scores[j] = float32(math.Exp(float64(scores[j] - mx)))
		sum += scores[j]
	}
	clear(out[:headDim])
	for j := first; j <= pos; j++ {
		w := scores[j] / sum
		vj := v[j*headDim : (j+1)*headDim]
		for d := range out[:headDim] {
			out[d] += w * vj[d]
		}
	}
}
