package runner

import (
	"fmt"
	"math"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/kernels"
)

// On-device sampling.
//
// When the backend implements kernels.DeviceSampler (the CUDA backend), the
// runner leaves the logits on the device and asks the backend for the
// sampled ids, so a step copies k ids and k logprobs back instead of k rows
// of vocabulary-sized logits. A row goes to the device only when the device
// rule gives what the host sampler (package sample) would: see
// deviceParams. The other rows of the step are sampled on the host as
// before; only their logits rows are copied.
//
// Greedy rows give the same ids on both paths (argmax, the lowest id on
// ties, NaNs ignored). Temperature rows use the same random number as the
// host — the uniform determined by (seed, output position) alone — and the
// same rule, an inverse-CDF draw in vocabulary order over the kept set, so
// a seeded request draws the same token on device and host except where
// (a) logits tie at the top-k or top-p threshold (the device keeps every
// tied logit; the host keeps exactly k, the lowest ids first), or (b) the
// draw lands within float32 rounding of the boundary between two tokens
// (the device sums in float32, gets U rounded to float32, and finds the
// top-p threshold by bisection on the logit value).

// greedyBelow is the temperature under which the host sampler is greedy.
const greedyBelow = 1e-5

// deviceParams reports whether the row of in can be sampled on the device
// with the same semantics as the host sampler, and with which parameters.
// It declines rows that need the sampled token's rank or top logprobs,
// logits processors (allowed_token_ids, a structured-output mask,
// bad_words, logit_bias, min_tokens while it still suppresses stop
// tokens), penalties, min_p, or a temperature or top_p that is not a
// number the device rule handles as the host does (NaN, +Inf).
func deviceParams(in *sample.Input) (kernels.SampleParams, bool) {
	p := in.Params
	if p == nil {
		return kernels.SampleParams{}, true // the sampler's default: greedy, no logprobs
	}
	if p.Logprobs >= 0 || in.Mask != nil || len(p.AllowedTokenIDs) > 0 || len(p.BadWords) > 0 || len(p.LogitBias) > 0 {
		return kernels.SampleParams{}, false
	}
	if r := p.RepetitionPenalty; r > 0 && r != 1 {
		return kernels.SampleParams{}, false
	}
	if p.FrequencyPenalty != 0 || p.PresencePenalty != 0 {
		return kernels.SampleParams{}, false
	}
	if minTokensActive(in, p) {
		return kernels.SampleParams{}, false
	}
	t := p.Temperature
	if !(t <= math.MaxFloat32) { // NaN or +Inf: leave the host's handling alone
		return kernels.SampleParams{}, false
	}
	if t < greedyBelow {
		return kernels.SampleParams{}, true
	}
	if p.MinP > 0 || p.TopP != p.TopP { // min_p, or a NaN top_p: the host's handling
		return kernels.SampleParams{}, false
	}
	pos := len(in.History) - in.NumPrompt
	return kernels.SampleParams{Temperature: t, TopK: p.TopK, TopP: p.TopP, U: drawUniform(in.Seed, pos)}, true
}

// minTokensActive reports whether the min_tokens processor still
// suppresses stop tokens or EOS for this row.
func minTokensActive(in *sample.Input, p *ipc.SamplingParams) bool {
	np := min(max(in.NumPrompt, 0), len(in.History))
	if len(in.History)-np >= int(p.MinTokens) {
		return false
	}
	return len(p.StopTokenIDs) > 0 || (!p.IgnoreEOS && len(in.EOS) > 0)
}

// uniform64 is the host sampler's random number (sample.Uniform) for output
// position pos of a request seeded with seed; negative positions draw as 0.
func uniform64(seed uint64, pos int) float64 {
	return sample.Uniform(seed, uint64(max(pos, 0)))
}

// drawUniform is uniform64 rounded to float32 and kept below 1.
func drawUniform(seed uint64, pos int) float32 {
	u := float32(uniform64(seed, pos))
	if u >= 1 {
		u = math.Nextafter32(1, 0)
	}
	return u
}

// executeDevice is Execute on a backend that samples on the device: the
// device rows (the first r.nDev of the step) are sampled where the logits
// are; only the other rows' logits come to the host.
func (r *Runner) executeDevice(b *sched.Batch, out []sample.Result) error {
	lt, err := r.forward(b, true)
	if err != nil || lt == nil || len(r.sampleSeq) == 0 {
		return err
	}
	k, nd := len(r.sampleSeq), r.nDev
	if nd > 0 {
		if cap(r.devIDs) < nd {
			r.devIDs, r.devLPs = make([]int32, nd), make([]float32, nd)
		}
		ids, lps := r.devIDs[:nd], r.devLPs[:nd]
		if r.devGreedy {
			err = r.dev.Greedy(lt, nd, ids, lps)
		} else {
			err = r.dev.SampleRows(lt, nd, r.devParams, ids, lps)
		}
		if err != nil {
			return fmt.Errorf("runner: step %d: device sampling: %w", b.Step, err)
		}
		for j, i := range r.sampleSeq[:nd] {
			out[i] = sample.Result{Token: ids[j]}
		}
		r.devRows += uint64(nd)
	}
	nh := k - nd
	if nh == 0 {
		return nil
	}
	src := lt
	if nd > 0 {
		// Move the host rows to the front of a second tensor, so only they
		// are copied.
		if r.hostLogits == nil || r.hostLogits.Rows() < nh {
			r.hostLogits = r.be.Alloc(max(nh, r.scratch.MaxOut), r.info.VocabSize)
		}
		r.gatherRows = r.gatherRows[:0]
		for j := nd; j < k; j++ {
			r.gatherRows = append(r.gatherRows, int32(j))
		}
		r.be.Gather(r.hostLogits, lt, r.gatherRows)
		src = r.hostLogits
	}
	return r.sampleHost(b, r.be.ToHost(src, nh), r.sampleSeq[nd:], out)
}
