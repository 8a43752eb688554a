package sample

import (
	"slices"

	"github.com/sluice-llm/sluice/ipc"
)

// process applies the logits processors and penalties to row in place.
func (s *worker) process(row []float32, in *Input, p *ipc.SamplingParams) {
	V := int32(len(row))
	hist := in.History
	np := min(max(in.NumPrompt, 0), len(hist))
	output := hist[np:]

	// Restrictions: allowed_token_ids, then the structured-output mask.
	if len(p.AllowedTokenIDs) > 0 {
		s.restrict(row, p.AllowedTokenIDs)
	}
	if in.Mask != nil {
		// The dense bitset, when the mask has one, is applied a word at a
		// time whether the mask is sparse or not (it holds the same set).
		if bm, ok := in.Mask.(BitsMask); ok {
			maskWords(row, bm.Words())
		} else if ids := in.Mask.AllowedIDs(); ids != nil {
			s.restrict(row, ids)
		} else {
			for i := range row {
				if !in.Mask.Allowed(int32(i)) {
					row[i] = negInf
				}
			}
		}
	}
	// bad_words: ban a word's last token when the output ends with the rest.
	for _, w := range p.BadWords {
		if len(w) == 0 {
			continue
		}
		last, prefix := w[len(w)-1], w[:len(w)-1]
		if last < 0 || last >= V || len(prefix) > len(output) {
			continue
		}
		if slices.Equal(output[len(output)-len(prefix):], prefix) {
			row[last] = negInf
		}
	}
	// min_tokens: no stop before it is reached.
	if len(output) < int(p.MinTokens) {
		for _, t := range p.StopTokenIDs {
			if t >= 0 && t < V {
				row[t] = negInf
			}
		}
		if !p.IgnoreEOS {
			for _, t := range in.EOS {
				if t >= 0 && t < V {
					row[t] = negInf
				}
			}
		}
	}
	for _, b := range p.LogitBias {
		if b.Token >= 0 && b.Token < V {
			row[b.Token] += b.Bias
		}
	}
	// Repetition penalty over prompt and output, once per distinct token.
	if r := p.RepetitionPenalty; r > 0 && r != 1 {
		st := s.nextStamp()
		for _, t := range hist {
			if t < 0 || t >= V || s.seen[t] == st {
				continue
			}
			s.seen[t] = st
			if row[t] > 0 {
				row[t] /= r
			} else {
				row[t] *= r
			}
		}
	}
	// Frequency and presence penalties over the output.
	if (p.FrequencyPenalty != 0 || p.PresencePenalty != 0) && len(output) > 0 {
		st := s.nextStamp()
		for _, t := range output {
			if t < 0 || t >= V {
				continue
			}
			if s.seen[t] != st {
				s.seen[t] = st
				s.count[t] = 0
			}
			s.count[t]++
		}
		for _, t := range output {
			if t < 0 || t >= V || s.count[t] == 0 {
				continue
			}
			row[t] -= p.FrequencyPenalty*float32(s.count[t]) + p.PresencePenalty
			s.count[t] = 0 // applied once
		}
	}
}

// restrict sets every logit outside ids to -inf.
func (s *worker) restrict(row []float32, ids []int32) {
	st := s.nextStamp()
	for _, t := range ids {
		if t >= 0 && int(t) < len(row) {
			s.mark[t] = st
		}
	}
	for i := range row {
		if s.mark[i] != st {
			row[i] = negInf
		}
	}
}
