// Package simexec is the simulated accelerator behind `engine-core
// --executor sim`: an implementation of sched.Executor that computes
// nothing but behaves, from the host's point of view, like a model.
//
// It is a capacity-planning and testing tool, never a stand-in for the real
// executor: it lets the whole host path (scheduler, wire protocol,
// frontends, detokenizer, SSE) be driven at 1024 concurrent streams on a
// laptop, with step times shaped like a real accelerator's, and lets tests
// push chosen text (tool-call markup, reasoning tags, stop strings,
// Unicode) through the real frontend.
//
// Behaviour:
//
//   - Tokens are deterministic: output position p of a request whose seed
//     is s is the same token in every run, whatever the batch holds (the
//     scheduler draws s at ADD unless the request has a seed). Tokens come
//     from a configurable id range with special tokens left out (and, when
//     a tokenizer is given, only ids that decode to valid, non-empty UTF-8).
//   - EOS: with probability EOSProb per generated token (default 0: never),
//     not before min_tokens and never with ignore_eos; stop_token_ids,
//     max_tokens and max_model_len are handled by the scheduler as for any
//     executor.
//   - Scripts: a JSON-lines file of {"match": "...", "output": "..."}.
//     The first entry whose match is a substring of the prompt text (the
//     tokenizer's decode of the prompt ids) drives the request: its output
//     text, encoded with the tokenizer, is emitted token by token, then EOS
//     (with ignore_eos, generation continues with ordinary tokens).
//   - Step time: StepTime + PrefillPerToken × prompt tokens in the step +
//     DecodePerToken × generated-token positions in the step. Execute
//     sleeps until that much time has passed since it began (spinning
//     instead when less than a millisecond remains, for accuracy).
//   - Structured outputs: when the token picked as above is masked out by
//     the request's constraint (sample.Input.Mask), the sim picks an
//     allowed one instead: EOS when the constraint allows it (and
//     min_tokens/ignore_eos do), else a hashed choice among a sparse
//     mask's ids, else the first allowed ordinary id from the hashed
//     position on, else the lowest allowed id. So structured outputs and
//     tool_choice required/named work with the sim (their text is valid
//     for the constraint, though not meaningful).
//   - Logprobs, when asked for, are synthetic: the chosen token with
//     logprob 0 and rank 1, then made-up alternatives.
package simexec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/engine-core/internal/splitmix"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// ScriptEntry is one line of a script file.
type ScriptEntry struct {
	// Match is a substring of the prompt text selecting this entry ("" matches
	// every prompt).
	Match string `json:"match"`
	// Output is the text to generate.
	Output string `json:"output"`
}

// Config configures the simulated accelerator.
type Config struct {
	// VocabSize bounds token ids (required unless Tokenizer is set).
	VocabSize int
	// EOSTokenIDs are the ids emitted to end a request; the first is used.
	EOSTokenIDs []int32
	// TokenMin and TokenMax bound generated ids, [TokenMin, TokenMax]
	// (0, 0: the whole vocabulary). Special tokens are always skipped.
	TokenMin, TokenMax int32
	// EOSProb is the probability of EOS per generated token (0: never).
	EOSProb float64
	// StepTime is the fixed cost of a step.
	StepTime time.Duration
	// PrefillPerToken and DecodePerToken are the per-token costs.
	PrefillPerToken time.Duration
	DecodePerToken  time.Duration
	// Script drives matching prompts (needs Tokenizer).
	Script []ScriptEntry
	// Tokenizer decodes prompts for script matching, encodes script
	// outputs, and tells special and undecodable ids apart. Optional.
	Tokenizer tokenizer.Tokenizer
	// Now and Sleep replace the clock in tests (nil: time.Now, time.Sleep).
	Now   func() time.Time
	Sleep func(time.Duration)
}

// Executor is the simulated accelerator. It implements sched.Executor.
// Not safe for concurrent use (the engine loop owns it).
type Executor struct {
	cfg     Config
	vocab   int     // vocabulary size
	ids     []int32 // the ids ordinary tokens are drawn from
	eos     int32
	scripts map[string]*scriptState
	now     func() time.Time
	sleep   func(time.Duration)
	topID   []int32 // logprob scratch, rows × MaxTopLogprobs
	topLP   []float32
}

type scriptState struct {
	tokens []int32 // nil: no entry matched
}

var _ sched.Executor = (*Executor)(nil)

// New returns a simulated accelerator.
func New(cfg Config) (*Executor, error) {
	vocab := cfg.VocabSize
	if cfg.Tokenizer != nil && vocab <= 0 {
		vocab = cfg.Tokenizer.VocabSize()
	}
	if vocab <= 0 {
		return nil, errors.New("simexec: vocabulary size unknown (set VocabSize or Tokenizer)")
	}
	if len(cfg.Script) > 0 && cfg.Tokenizer == nil {
		return nil, errors.New("simexec: a script needs a tokenizer")
	}
	if cfg.EOSProb < 0 || cfg.EOSProb > 1 {
		return nil, fmt.Errorf("simexec: EOS probability %g outside [0, 1]", cfg.EOSProb)
	}
	lo, hi := cfg.TokenMin, cfg.TokenMax
	if lo == 0 && hi == 0 {
		hi = int32(vocab - 1)
	}
	if lo < 0 || hi >= int32(vocab) || lo > hi {
		return nil, fmt.Errorf("simexec: token range [%d, %d] outside the vocabulary [0, %d)", lo, hi, vocab)
	}
	e := &Executor{cfg: cfg, vocab: vocab, eos: -1, scripts: map[string]*scriptState{}, now: cfg.Now, sleep: cfg.Sleep}
	if e.now == nil {
		e.now = time.Now
	}
	if e.sleep == nil {
		e.sleep = time.Sleep
	}
	if len(cfg.EOSTokenIDs) > 0 {
		e.eos = cfg.EOSTokenIDs[0]
	}
	for id := lo; id <= hi; id++ {
		if isEOS(cfg.EOSTokenIDs, id) {
			continue
		}
		if t := cfg.Tokenizer; t != nil {
			if t.IsSpecial(id) {
				continue
			}
			b := t.TokenBytes(id)
			if len(b) == 0 || !utf8.Valid(b) {
				continue
			}
		}
		e.ids = append(e.ids, id)
	}
	if len(e.ids) == 0 {
		return nil, fmt.Errorf("simexec: no usable token id in [%d, %d]", lo, hi)
	}
	return e, nil
}

func isEOS(eos []int32, id int32) bool {
	for _, x := range eos {
		if x == id {
			return true
		}
	}
	return false
}

// LoadScript reads a JSON-lines script file (blank lines and lines starting
// with # or // are skipped).
func LoadScript(path string) ([]ScriptEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sim script: %w", err)
	}
	return ParseScript(data, path)
}

// ParseScript parses script lines; name is used in error messages.
func ParseScript(data []byte, name string) ([]ScriptEntry, error) {
	var out []ScriptEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, "//") {
			continue
		}
		var e ScriptEntry
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Execute "computes" the batch: it picks each sampled token and waits out
// the modelled step time.
func (e *Executor) Execute(b *sched.Batch, out []sample.Result) error {
	start := e.now()
	if len(out) < len(b.Seqs) {
		return fmt.Errorf("simexec: %d results for %d sequences", len(out), len(b.Seqs))
	}
	var prefill, decode int
	for i := range b.Seqs {
		sw := &b.Seqs[i]
		np := sw.In.NumPrompt
		for j := range sw.Tokens {
			if sw.StartPos+j < np {
				prefill++
			} else {
				decode++
			}
		}
		if !sw.Sample {
			continue
		}
		out[i].Token = e.pick(sw)
		if p := sw.In.Params; p != nil && p.Logprobs >= 0 {
			out[i].Logprobs = e.logprobs(out[i].Token, int(min(p.Logprobs, sample.MaxTopLogprobs)), i)
		} else {
			out[i].Logprobs = ipc.TokenLogprobs{}
		}
	}
	d := e.cfg.StepTime + time.Duration(prefill)*e.cfg.PrefillPerToken + time.Duration(decode)*e.cfg.DecodePerToken
	e.wait(start, d)
	return nil
}

// wait returns once d has passed since start.
func (e *Executor) wait(start time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := start.Add(d)
	for {
		left := deadline.Sub(e.now())
		if left <= 0 {
			return
		}
		if left >= time.Millisecond {
			e.sleep(left - 500*time.Microsecond)
			continue
		}
		if e.cfg.Sleep != nil { // tests: a fake clock never advances by spinning
			e.sleep(left)
		}
	}
}

// pick returns the token for the next output position of sw's request,
// one its structured-output mask allows when it has one.
func (e *Executor) pick(sw *sched.SeqWork) int32 {
	tok := e.pickFree(sw)
	m := sw.In.Mask
	if m == nil || m.Allowed(tok) {
		return tok
	}
	in := &sw.In
	pos := max(0, len(in.History)-in.NumPrompt)
	if p := in.Params; e.eos >= 0 && m.Allowed(e.eos) && (p == nil || (!p.IgnoreEOS && pos >= int(p.MinTokens))) {
		return e.eos
	}
	r := mix(in.Seed, uint64(pos)^0x5a5a)
	if ids := m.AllowedIDs(); len(ids) > 0 {
		return ids[r%uint64(len(ids))]
	}
	start := int(r % uint64(len(e.ids)))
	for i := range e.ids {
		if id := e.ids[(start+i)%len(e.ids)]; m.Allowed(id) {
			return id
		}
	}
	for id := int32(0); id < int32(e.vocab); id++ {
		if m.Allowed(id) {
			return id
		}
	}
	return tok // nothing allowed: the scheduler reports the dead end
}

// pickFree is pick without regard to a structured-output mask.
func (e *Executor) pickFree(sw *sched.SeqWork) int32 {
	in := &sw.In
	pos := len(in.History) - in.NumPrompt // output index of the token to pick
	if pos < 0 {
		pos = 0
	}
	var minTokens int
	ignoreEOS := false
	if p := in.Params; p != nil {
		minTokens = int(p.MinTokens)
		ignoreEOS = p.IgnoreEOS
		if len(p.AllowedTokenIDs) > 0 {
			return p.AllowedTokenIDs[mix(in.Seed, uint64(pos))%uint64(len(p.AllowedTokenIDs))]
		}
	}
	if len(e.cfg.Script) > 0 {
		st := e.script(sw.ReqID, in)
		if st.tokens != nil {
			if pos < len(st.tokens) {
				return st.tokens[pos]
			}
			if !ignoreEOS && e.eos >= 0 {
				return e.eos
			}
		}
	}
	r := mix(in.Seed, uint64(pos))
	if e.cfg.EOSProb > 0 && e.eos >= 0 && !ignoreEOS && pos >= minTokens {
		if float64(mix(r, 0xe05)>>11)/(1<<53) < e.cfg.EOSProb {
			return e.eos
		}
	}
	return e.ids[r%uint64(len(e.ids))]
}

// script finds (once per request) the script entry matching its prompt.
func (e *Executor) script(id string, in *sample.Input) *scriptState {
	if st, ok := e.scripts[id]; ok {
		return st
	}
	st := &scriptState{}
	np := min(in.NumPrompt, len(in.History))
	text := e.cfg.Tokenizer.Decode(in.History[:np], false)
	for _, ent := range e.cfg.Script {
		if strings.Contains(text, ent.Match) {
			st.tokens = e.cfg.Tokenizer.Encode(ent.Output, false)
			if st.tokens == nil {
				st.tokens = []int32{}
			}
			break
		}
	}
	e.scripts[id] = st
	return st
}

// logprobs makes up logprobs for row i: the chosen token first (logprob 0,
// rank 1), then k-1 other ids with falling logprobs. The slices are
// scratch, valid until the next Execute.
func (e *Executor) logprobs(tok int32, k, i int) ipc.TokenLogprobs {
	const w = sample.MaxTopLogprobs
	if need := (i + 1) * w; len(e.topID) < need {
		e.topID = append(e.topID, make([]int32, need-len(e.topID))...)
		e.topLP = append(e.topLP, make([]float32, need-len(e.topLP))...)
	}
	ids := e.topID[i*w : i*w : (i+1)*w]
	lps := e.topLP[i*w : i*w : (i+1)*w]
	for j := range k {
		id := tok
		if j > 0 {
			id = e.ids[(uint64(tok)+uint64(j)*7919)%uint64(len(e.ids))]
		}
		ids = append(ids, id)
		lps = append(lps, -float32(j)*2)
	}
	return ipc.TokenLogprobs{Logprob: 0, Rank: 1, TopIDs: ids, TopLogprobs: lps}
}

// Release forgets a request's script state.
func (e *Executor) Release(id string) { delete(e.scripts, id) }

// mix derives a 64-bit value from (seed, pos) with splitmix64.
func mix(seed, pos uint64) uint64 {
	return splitmix.Mix(seed ^ (pos+1)*splitmix.Golden)
}
