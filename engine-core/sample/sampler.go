// Package sample picks the next token of each request from the model's
// logits: greedy, temperature, top-k, top-p, min-p, per-request seeds,
// presence/frequency/repetition penalties, logit_bias, allowed_token_ids,
// bad_words, structured-output masks, and logprobs.
//
// Semantics follow vLLM v1's Sampler, in its order:
//
//  1. raw logprobs are taken from the logits as the model produced them
//     (vLLM's default logprobs_mode "raw_logprobs"): the sampled token's
//     logprob and 1-based rank, and the top Params.Logprobs (≤ 20) tokens,
//     all from log_softmax of the unprocessed row;
//  2. logits processors: allowed_token_ids, the structured-output Mask,
//     bad_words (single-token words always; multi-token words when the
//     output so far ends with all but their last token), min_tokens (EOS
//     and stop_token_ids suppressed until reached), logit_bias;
//  3. penalties: repetition (prompt and output tokens: positive logits
//     divided by the penalty, negative ones multiplied), then frequency
//     and presence (output tokens only, subtracted);
//  4. greedy when Temperature is 0 (argmax, ties to the lowest id);
//     otherwise logits/T, then min_p (relative to the top probability),
//     top_k, top_p on the renormalised top-k distribution, and one draw.
//
// The draw for output position p of a request uses a generator seeded by
// (Input.Seed, p) alone, so seeded requests reproduce whatever else shares
// their batch and wherever they sit in it.
//
// n>1 is not handled here: the frontend sends n child requests, each with
// its own seed.
//
// Sample overwrites the logits it is given (they are scratch) and allocates
// nothing in steady state: scratch buffers live in the Sampler, and top-k /
// top-p use partial selection, never a full sort of the vocabulary.
//
// The per-logit work runs in AVX-512 assembly where the CPU has it (chosen
// at start-up; plain Go elsewhere, or with the purego build tag): max and
// first index, exp, counting and summing above thresholds, compaction,
// and the structured-output mask (applied from its bitset a 64-bit word
// at a time: all-ones words skipped, the others by masked stores of
// -inf). Greedy rows without logprobs cost one max pass and a partial
// index pass; top-k and top-p find their cut with a sampled estimate, one
// or two counting passes and a histogram of the few hundred values near
// the cut (see draw).
//
// Precision: probabilities are float32 exps (Cephes' expf polynomial,
// relative error below 2.5e-7 against math.Exp; assembly and Go agree to
// 4e-7). Sums of probabilities are float32 within 64-value lane runs and
// float64 beyond (about 1e-7 relative). Given the probabilities, the
// top-k / top-p set and the token drawn for a uniform number are those of
// a full stable sort by probability (ties to the lowest id) and float64
// cumulative sums, except where a cumulative sum lies within 2e-6 of the
// total of the cut or of the draw's target (tested). The assembly and Go
// paths may choose differently in those rounding-sized cases, so seeded
// runs reproduce exactly on the same kind of CPU.
package sample

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluice-llm/sluice/ipc"
)

// MaxTopLogprobs bounds Params.Logprobs.
const MaxTopLogprobs = 20

var negInf = float32(math.Inf(-1))

// Sampler holds the scratch space of sampling; one per executor. Not safe
// for concurrent use.
type Sampler struct {
	vocab   int
	workers []*worker
	topID   []int32 // rows × MaxTopLogprobs
	topLP   []float32
	wg      sync.WaitGroup
}

// worker is the scratch space of one goroutine sampling rows.
type worker struct {
	stamp     uint32
	seen      []uint32 // seen[id] == stamp: id already handled this row
	mark      []uint32 // mark[id] == stamp: id is allowed this row
	count     []int32
	raw       []float32 // unprocessed row, for logprobs
	e         []float32 // dense unnormalised probabilities
	idx       []int32   // candidate ids (with slack for compress)
	val       []float32 // candidate values
	bidx      []int32   // the band being selected (a copy of idx, val)
	bval      []float32 //
	chunkSum  []float64 // per-chunk mass of the draw's set
	chunkTies []int32   // ties at the threshold still to take, per chunk
	hiChunk   []float64 // per-chunk mass above the upper bracket
	passChunk [2][]float64
	sample    [sampleSize]float32
	keys      [2][sampleSize]uint16 // sortCoarse scratch
	ln32      lanes32
	mc        massCount
}

func newWorker(vocab int) *worker {
	nch := (vocab + chunk - 1) / chunk
	return &worker{
		seen:      make([]uint32, vocab),
		mark:      make([]uint32, vocab),
		count:     make([]int32, vocab),
		raw:       make([]float32, vocab),
		e:         make([]float32, vocab),
		idx:       make([]int32, vocab+slack),
		val:       make([]float32, vocab+slack),
		bidx:      make([]int32, vocab+slack),
		bval:      make([]float32, vocab+slack),
		chunkSum:  make([]float64, nch),
		chunkTies: make([]int32, nch),
		hiChunk:   make([]float64, nch),
		passChunk: [2][]float64{make([]float64, nch), make([]float64, nch)},
	}
}

// New returns a sampler for rows of vocabSize logits, sampling on the
// calling goroutine.
func New(vocabSize int) *Sampler {
	if vocabSize < 1 {
		vocabSize = 1
	}
	return &Sampler{vocab: vocabSize, workers: []*worker{newWorker(vocabSize)}}
}

// SetWorkers lets Sample spread the rows of a large step over n goroutines
// (n ≤ 1: the calling goroutine only, the default). Each worker has its own
// scratch (about 36 bytes per vocabulary entry). Results do not depend on
// n. With n > 1 a step of many rows costs a few allocations (goroutine
// launches).
func (s *Sampler) SetWorkers(n int) {
	n = max(n, 1)
	for len(s.workers) < n {
		s.workers = append(s.workers, newWorker(s.vocab))
	}
	s.workers = s.workers[:n]
}

// VocabSize is the row length the sampler expects.
func (s *Sampler) VocabSize() int { return s.vocab }

var defaultParams = ipc.SamplingParams{Logprobs: -1}

// minRowsPerWorker keeps small steps on one goroutine.
const minRowsPerWorker = 8

// Sample picks one token per row: logits holds len(in) rows of VocabSize
// values, row i for in[i], and the choice goes to out[i]. logits is
// overwritten. Logprob slices in out (TopIDs, TopLogprobs) point into the
// sampler's scratch and are valid until the next call.
func (s *Sampler) Sample(logits []float32, in []Input, out []Result) error {
	if len(logits) < len(in)*s.vocab {
		return fmt.Errorf("sample: %d logits for %d rows of %d", len(logits), len(in), s.vocab)
	}
	if len(out) < len(in) {
		return fmt.Errorf("sample: %d results for %d rows", len(out), len(in))
	}
	if need := len(in) * MaxTopLogprobs; len(s.topID) < need {
		s.topID = make([]int32, need)
		s.topLP = make([]float32, need)
	}
	nw := min(len(s.workers), len(in)/minRowsPerWorker)
	if nw <= 1 {
		s.rows(s.workers[0], logits, in, out, 0, len(in))
		return nil
	}
	per := (len(in) + nw - 1) / nw
	for w := 1; w < nw; w++ {
		lo, hi := w*per, min((w+1)*per, len(in))
		if lo >= hi {
			break
		}
		s.wg.Add(1)
		go func(wk *worker, lo, hi int) {
			defer s.wg.Done()
			s.rows(wk, logits, in, out, lo, hi)
		}(s.workers[w], lo, hi)
	}
	s.rows(s.workers[0], logits, in, out, 0, min(per, len(in)))
	s.wg.Wait()
	return nil
}

// rows samples rows [lo, hi) with worker w.
func (s *Sampler) rows(w *worker, logits []float32, in []Input, out []Result, lo, hi int) {
	for i := lo; i < hi; i++ {
		row := logits[i*s.vocab : (i+1)*s.vocab]
		ids := s.topID[i*MaxTopLogprobs : i*MaxTopLogprobs : (i+1)*MaxTopLogprobs]
		lps := s.topLP[i*MaxTopLogprobs : i*MaxTopLogprobs : (i+1)*MaxTopLogprobs]
		w.sampleRow(row, &in[i], &out[i], ids, lps)
	}
}

func (s *worker) nextStamp() uint32 {
	s.stamp++
	if s.stamp == 0 { // wrapped: clear so stale stamps cannot match
		clear(s.seen)
		clear(s.mark)
		s.stamp = 1
	}
	return s.stamp
}

func (s *worker) sampleRow(row []float32, in *Input, res *Result, ids []int32, lps []float32) {
	p := in.Params
	if p == nil {
		p = &defaultParams
	}
	wantLP := p.Logprobs >= 0
	if wantLP {
		copy(s.raw, row)
	}
	s.process(row, in, p)
	var tok int32
	if p.Temperature < 1e-5 {
		tok = argmax(row)
	} else {
		pos := len(in.History) - in.NumPrompt
		tok = s.draw(row, p, Uniform(in.Seed, uint64(max(pos, 0))))
	}
	res.Token = tok
	if wantLP {
		s.logprobs(tok, int(min(p.Logprobs, MaxTopLogprobs)), &res.Logprobs, ids, lps)
	} else {
		res.Logprobs = ipc.TokenLogprobs{}
	}
}

// argmaxGeneric is argmax in plain Go (the reference for the assembly
// path): the index of the largest value, the lowest on ties; NaNs are
// ignored; 0 when nothing exceeds -inf.
func argmaxGeneric(row []float32) int32 {
	var m [4]float32
	var at [4]int
	m[0], m[1], m[2], m[3] = negInf, negInf, negInf, negInf
	i := 0
	for ; i+4 <= len(row); i += 4 {
		r := row[i : i+4 : i+4]
		if r[0] > m[0] {
			m[0], at[0] = r[0], i
		}
		if r[1] > m[1] {
			m[1], at[1] = r[1], i+1
		}
		if r[2] > m[2] {
			m[2], at[2] = r[2], i+2
		}
		if r[3] > m[3] {
			m[3], at[3] = r[3], i+3
		}
	}
	for ; i < len(row); i++ {
		if row[i] > m[0] {
			m[0], at[0] = row[i], i
		}
	}
	best, bi := negInf, 0
	for l := range 4 {
		if m[l] > best || (m[l] == best && m[l] > negInf && at[l] < bi) {
			best, bi = m[l], at[l]
		}
	}
	return int32(bi)
}

// maxOf returns the largest value of row ignoring NaNs (-inf when none).
// Four independent running maxima keep the loop free of a serial
// dependency.
func maxOf(row []float32) float32 {
	m0, m1, m2, m3 := negInf, negInf, negInf, negInf
	i := 0
	for ; i+4 <= len(row); i += 4 {
		r := row[i : i+4 : i+4]
		if r[0] > m0 {
			m0 = r[0]
		}
		if r[1] > m1 {
			m1 = r[1]
		}
		if r[2] > m2 {
			m2 = r[2]
		}
		if r[3] > m3 {
			m3 = r[3]
		}
	}
	for ; i < len(row); i++ {
		if row[i] > m0 {
			m0 = row[i]
		}
	}
	if m1 > m0 {
		m0 = m1
	}
	if m3 > m2 {
		m2 = m3
	}
	if m2 > m0 {
		m0 = m2
	}
	return m0
}
