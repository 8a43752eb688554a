package outputproc

import (
	"slices"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc/detok"
	"github.com/sluice-llm/sluice/outputproc/stopstr"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// Params configure the output state of one completion.
type Params struct {
	// StreamInterval is the number of tokens per delta after the first
	// (values below 1 mean 1). FinalOnly overrides it.
	StreamInterval int
	// FinalOnly emits one delta at the end (non-streamed requests).
	FinalOnly bool
	// Stops are the stop strings; IncludeStop keeps the matched one.
	Stops []string
	// StopSet, when set, is Stops compiled (stopstr.Compile), shared by
	// the choices of one request; nil compiles Stops here.
	StopSet     *stopstr.Set
	IncludeStop bool
	// SkipSpecial drops special tokens from the text.
	SkipSpecial bool
	// PromptIDs are the prompt's tokens (detokenization context).
	PromptIDs []int32
	// MinTokens: stop strings are not searched in the text of the first
	// MinTokens tokens.
	MinTokens int
	// Logprobs keeps each token's logprobs in the deltas.
	Logprobs bool
	// EOSIDs are the ids that end generation as EOS. When the engine
	// finishes with FinishStop on one of them, or on a stop token id, that
	// token's text is left out (unless IncludeStop); a FinishStop on any
	// other token (a structured-output grammar completing) keeps it.
	EOSIDs []int32
}

// StopReason says which stop condition ended a completion: a stop token
// id, a stop string, or neither (EOS, length).
type StopReason struct {
	Token   int32
	Text    string
	IsToken bool
	IsText  bool
}

// TextDelta is what a State emits: the text and tokens since the previous delta.
// Text is an ordinary (immutable) string; the slices are valid until the
// next call on the State.
type TextDelta struct {
	Text     string
	TokenIDs []int32
	Logprobs []ipc.TokenLogprobs // one per token id when Params.Logprobs
	// Finished is set on the last delta of the completion.
	Finished     bool
	FinishReason ipc.FinishReason
	StopReason   StopReason
	// Error is the engine's error text when FinishReason is FinishError.
	Error string
	// NumTokens counts all output tokens of the completion so far, and
	// CachedTokens the prompt tokens the engine found in its prefix cache.
	NumTokens    int
	CachedTokens int
	// First marks the first delta of the completion.
	First bool
}

// State is the output state of one completion.
type State struct {
	p        Params
	dec      detok.Decoder // by value: one allocation, adjacent lines
	stop     *stopstr.Matcher
	interval int

	text      []byte // pending text of several pieces
	textStr   string // pending text when it is a single piece
	ids       []int32
	logprobs  []ipc.TokenLogprobs
	numTokens int
	cached    int
	sent      bool // a delta has been emitted
	finished  bool
	emitted   bool // delta holds views of text/ids/logprobs
	lpBytes   int  // memory held by the pending logprobs (estimate)
	delta     TextDelta
}

// New returns the state of one completion decoded with tok.
func New(tok tokenizer.Tokenizer, p Params) *State {
	s := new(State)
	s.Init(tok, p)
	return s
}

// Init sets s up as New does, in place: a caller serving many streams can
// keep each State inside its own per-stream struct, so that the State and
// the caller's fields share cache lines and one allocation (at a thousand
// streams every stream's state is cold by its next token, and each line is
// a cache miss).
func (s *State) Init(tok tokenizer.Tokenizer, p Params) {
	*s = State{
		p:        p,
		dec:      *detok.New(tok, detok.Options{SkipSpecial: p.SkipSpecial, PromptIDs: p.PromptIDs}),
		interval: p.StreamInterval,
	}
	if s.interval < 1 {
		s.interval = 1
	}
	if len(p.Stops) > 0 {
		set := p.StopSet
		if set == nil {
			set = stopstr.Compile(p.Stops)
		}
		s.stop = set.Matcher(p.IncludeStop)
	}
}

// Finished reports whether the completion has ended.
func (s *State) Finished() bool { return s.finished }

// NumTokens is the number of output tokens so far.
func (s *State) NumTokens() int { return s.numTokens }

// Process applies one engine output. It returns the delta to emit now, or
// nil when the stream interval (or hold, set by a caller whose client has
// not yet taken the previous delta) keeps the tokens pending. abort reports
// that a stop string ended the completion while the engine still runs it:
// the caller must send ABORT. Outputs after the finish are ignored.
func (s *State) Process(out *ipc.Output, hold bool) (d *TextDelta, abort bool) {
	ok, abort := s.ProcessInto(out, hold, &s.delta)
	if !ok {
		return nil, abort
	}
	return &s.delta, abort
}

// ProcessInto is Process writing the delta into d (reporting whether there
// is one): a caller can keep d on its stack, which stays in the CPU's
// caches while a thousand streams' States do not.
func (s *State) ProcessInto(out *ipc.Output, hold bool, d *TextDelta) (ok, abort bool) {
	if s.finished {
		return false, false
	}
	s.reset()
	if out.NumCachedTokens > 0 {
		s.cached = int(out.NumCachedTokens)
	}
	ids := out.NewTokenIDs
	before := s.numTokens
	s.numTokens += len(ids)
	s.ids = append(s.ids, ids...)
	if s.p.Logprobs {
		s.logprobs = append(s.logprobs, out.Logprobs...)
		for i := range out.Logprobs {
			s.lpBytes += logprobBytes(&out.Logprobs[i])
		}
	}
	engineFinished := out.FinishReason != ipc.FinishNone
	textIDs := ids
	if out.FinishReason == ipc.FinishStop && len(ids) > 0 && (out.StopReason >= 0 || slices.Contains(s.p.EOSIDs, ids[len(ids)-1])) {
		textIDs = detok.DetokenizableIDs(ids, true, s.p.IncludeStop)
	}
	txt := s.dec.Add(textIDs)
	if engineFinished {
		txt += s.dec.Flush()
	}
	if s.stop != nil {
		if before+len(ids) <= s.p.MinTokens {
			txt = s.stop.Pass(txt)
		} else {
			emit, stopped, matched := s.stop.Add(txt)
			txt = emit
			if stopped {
				s.appendText(txt)
				abort = !engineFinished
				s.finish(d, ipc.FinishStop, StopReason{Text: matched, IsText: true}, "")
				return true, abort
			}
		}
		if engineFinished {
			txt += s.stop.Flush()
		}
	}
	s.appendText(txt)
	if engineFinished {
		var sr StopReason
		if out.FinishReason == ipc.FinishStop && out.StopReason >= 0 {
			sr = StopReason{Token: out.StopReason, IsToken: true}
		}
		s.finish(d, out.FinishReason, sr, out.Error)
		return true, false
	}
	if s.p.FinalOnly || hold {
		return false, false
	}
	if !s.sent || len(s.ids) >= s.interval {
		if len(s.ids) == 0 {
			return false, false
		}
		s.emit(d)
		return true, false
	}
	return false, false
}

// Fail ends the completion with an error (engine down, internal failure),
// flushing everything generated so far: the returned delta carries the
// pending text (including held-back partial text) and FinishError with msg.
// It returns nil when the completion had already finished.
func (s *State) Fail(msg string) *TextDelta {
	if s.finished {
		return nil
	}
	txt := s.dec.Flush()
	s.reset()
	if s.stop != nil {
		emit, stopped, _ := s.stop.Add(txt)
		txt = emit
		if !stopped {
			txt += s.stop.Flush()
		}
	}
	s.appendText(txt)
	s.finish(&s.delta, ipc.FinishError, StopReason{}, msg)
	return &s.delta
}

// PendingBytes estimates the memory held by output not yet emitted (text,
// token ids, logprobs): what a stream interval or a hold keeps back. A
// caller bounds it for clients that stop reading.
func (s *State) PendingBytes() int {
	if s.emitted {
		return 0 // reset at the next call
	}
	return len(s.text) + len(s.textStr) + 4*len(s.ids) + s.lpBytes
}

// logprobBytes estimates the memory of one token's logprobs entry.
func logprobBytes(e *ipc.TokenLogprobs) int {
	return 56 + 8*len(e.TopIDs)
}

// Pending returns the delta of everything not yet emitted (nil when there
// is nothing), for a caller that stopped holding and wants the rest now.
func (s *State) Pending() *TextDelta {
	s.reset()
	if s.finished || (len(s.ids) == 0 && len(s.text) == 0 && s.textStr == "") {
		return nil
	}
	s.emit(&s.delta)
	return &s.delta
}

func (s *State) finish(d *TextDelta, fr ipc.FinishReason, sr StopReason, errMsg string) {
	s.finished = true
	s.emit(d)
	d.Finished = true
	d.FinishReason = fr
	d.StopReason = sr
	d.Error = errMsg
}

// emit moves the pending text and tokens into d. The previous delta's
// storage is reused, so the caller must be done with it.
func (s *State) emit(d *TextDelta) {
	*d = TextDelta{
		Text:         s.takeText(),
		TokenIDs:     s.ids,
		NumTokens:    s.numTokens,
		CachedTokens: s.cached,
		First:        !s.sent,
	}
	if s.p.Logprobs {
		d.Logprobs = s.logprobs
	}
	s.sent = true
	s.emitted = true
}

// reset drops what the previous delta carried; it runs at the start of the
// next call so that delta's views stay valid until then.
func (s *State) reset() {
	if !s.emitted {
		return
	}
	s.emitted = false
	s.lpBytes = 0
	s.ids = s.ids[:0]
	clear(s.logprobs)
	s.logprobs = s.logprobs[:0]
}

// appendText adds txt to the pending text. A single pending piece is kept
// as the string the detokenizer returned, so the common one-piece delta
// costs no copy; several pieces are joined in a reused buffer.
func (s *State) appendText(txt string) {
	switch {
	case txt == "":
	case s.textStr == "" && len(s.text) == 0:
		s.textStr = txt
	default:
		if s.textStr != "" {
			s.text = append(s.text, s.textStr...)
			s.textStr = ""
		}
		s.text = append(s.text, txt...)
	}
}

// takeText returns the pending text as an immutable string and clears it.
func (s *State) takeText() string {
	if len(s.text) == 0 {
		t := s.textStr
		s.textStr = ""
		return t
	}
	t := string(s.text)
	s.text = s.text[:0]
	return t
}
