package render

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/outputproc"
)

// Completions renders /v1/completions: text_completion events with legacy
// logprobs (text_offset counts characters streamed so far, per choice) and
// a text_completion body.
type Completions struct {
	openAIStream
	off []int // characters streamed so far, by choice index (with logprobs)
}

// NewCompletions returns the completions renderer of one request.
func NewCompletions(r Request) *Completions {
	c := new(Completions)
	c.Init(r)
	return c
}

// Init sets c up as NewCompletions does, in place (a caller can keep the
// renderer in its own per-request struct).
func (c *Completions) Init(r Request) {
	*c = Completions{}
	c.init(r, "text_completion")
}

// AppendDelta implements Renderer.
func (c *Completions) AppendDelta(dst []byte, d *outputproc.Delta) []byte {
	finish, stop := finishName(d)
	text := d.Content
	if text == "" && finish == "" && (!c.r.Logprobs || len(d.TokenIDs) == 0) {
		return dst
	}
	ch := CompletionChoice{Index: d.Index, Text: text, FinishReason: finish, StopReason: stop}
	var lp Logprobs
	if c.r.Logprobs {
		// text_offset: only logprobs show it, so only they count it
		for len(c.off) <= d.Index {
			c.off = append(c.off, 0)
		}
		lp = Logprobs{TokenIDs: d.TokenIDs, Entries: d.Logprobs, Tok: c.r.Tok, TextOffset: c.off[d.Index]}
		ch.Logprobs = &lp
		c.off[d.Index] += utf8.RuneCountInString(text)
	}
	var u *Usage
	if c.r.ContinuousUsage {
		u = usage(&d.Usage)
	}
	return AppendCompletionChunk(dst, &c.hdr, &ch, u)
}

type completionChoiceJSON struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

// Body implements Renderer: a text_completion object.
func (c *Completions) Body(choices []*outputproc.Accumulator, u *outputproc.Usage) []byte {
	out := make([]completionChoiceJSON, 0, len(choices))
	for _, a := range choices {
		fr, sr := bodyFinish(a)
		cj := completionChoiceJSON{Index: a.Index, Text: a.Content.String(), FinishReason: fr, StopReason: sr, Logprobs: json.RawMessage("null")}
		if c.r.Logprobs {
			cj.Logprobs = AppendLegacyLogprobs(nil, &Logprobs{TokenIDs: a.TokenIDs, Entries: a.Logprobs, Tok: c.r.Tok})
		}
		out = append(out, cj)
	}
	return newResponse(&c.r, "text_completion", u, out)
}
