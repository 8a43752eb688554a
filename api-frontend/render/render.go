package render

import (
	"encoding/json"
	"strconv"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc"
)

// Renderer renders one request's deltas in its API's shape. One Renderer
// serves one HTTP request; its methods are called in order and never
// concurrently (see the package doc).
type Renderer interface {
	// AppendDelta appends the stream events for d, which may be none (a
	// delta that carries nothing this API shows). A failed delta
	// (d.Failed()) carries the text generated before the failure; the
	// error itself comes next through AppendError.
	AppendDelta(dst []byte, d *outputproc.Delta) []byte
	// AppendEnd appends the events that end a stream whose completions
	// all finished; u is the whole request's usage.
	AppendEnd(dst []byte, u *outputproc.Usage) []byte
	// AppendError appends the events that end a stream with an error.
	AppendError(dst []byte, e *openai.Error) []byte
	// Body renders the non-streamed response from the request's
	// completions (in choice order) and the whole request's usage.
	Body(choices []*outputproc.Accumulator, u *outputproc.Usage) []byte
}

// Request is what a renderer needs to know about its request.
type Request struct {
	// ID, Created (Unix seconds) and Model identify the response.
	ID      string
	Created int64
	Model   string
	// Logprobs: the request asked for logprobs; Tok spells their tokens.
	Logprobs bool
	Tok      TokenText
	// ContinuousUsage adds each completion's usage to every chunk.
	ContinuousUsage bool
	// IncludeUsage adds a final usage chunk to the stream.
	IncludeUsage bool
	// Reasoning: a reasoning parser runs (chat bodies then carry the
	// field); ReasoningField spells it ("reasoning" or
	// "reasoning_content").
	Reasoning      bool
	ReasoningField string
}

// openAIStream is what the OpenAI renderers share: the chunk header and
// the request, the end of a stream and its error event.
type openAIStream struct {
	hdr StreamHeader
	r   Request
}

func (o *openAIStream) init(r Request, object string) {
	o.r = r
	o.hdr = NewStreamHeader(r.ID, object, r.Created, r.Model)
}

// Header returns the stream's fixed chunk prefix.
func (o *openAIStream) Header() *StreamHeader { return &o.hdr }

// AppendEnd implements Renderer: the usage chunk when asked for, then
// [DONE].
func (o *openAIStream) AppendEnd(dst []byte, u *outputproc.Usage) []byte {
	if o.r.IncludeUsage {
		dst = AppendUsageChunk(dst, &o.hdr, usage(u))
	}
	return append(dst, Done...)
}

// AppendError implements Renderer: an error event, then [DONE].
func (o *openAIStream) AppendError(dst []byte, e *openai.Error) []byte {
	return append(AppendErrorEvent(dst, e), Done...)
}

// usage converts a Usage for the appenders.
func usage(u *outputproc.Usage) *Usage {
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens}
}

// stopReason converts a stop reason for the appenders.
func stopReason(s outputproc.StopReason) StopReason {
	return StopReason{Token: s.Token, Text: s.Text, IsToken: s.IsToken, IsText: s.IsText}
}

// finishName spells how a delta ended ("" while running or failed) and its
// stop reason.
func finishName(d *outputproc.Delta) (string, StopReason) {
	if !d.Finished() || d.Failed() {
		return "", StopReason{}
	}
	return d.Finish.Reason.String(), stopReason(d.Finish.Stop)
}

// Non-streamed response shapes (OpenAI).

type respUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type responseJSON struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	Model   string    `json:"model"`
	Choices any       `json:"choices"`
	Usage   respUsage `json:"usage"`
}

func newResponse(r *Request, object string, u *outputproc.Usage, choices any) []byte {
	resp := responseJSON{ID: r.ID, Object: object, Created: r.Created, Model: r.Model, Choices: choices}
	resp.Usage = respUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	resp.Usage.PromptTokensDetails.CachedTokens = u.CachedTokens
	b, err := json.Marshal(resp)
	if err != nil {
		return openai.NewError(500, "render response: %v", err).AppendJSON(nil)
	}
	return b
}

func stopJSON(s StopReason) json.RawMessage {
	switch {
	case s.IsText:
		return openai.AppendString(nil, s.Text)
	case s.IsToken:
		return json.RawMessage(strconv.Itoa(int(s.Token)))
	}
	return json.RawMessage("null")
}

// bodyFinish spells an accumulated completion's finish for a body.
func bodyFinish(a *outputproc.Accumulator) (*string, json.RawMessage) {
	fr := ""
	var sr StopReason
	if a.Finish.Reason != outputproc.FinishNone && a.Finish.Reason != outputproc.FinishError {
		fr, sr = a.Finish.Reason.String(), stopReason(a.Finish.Stop)
	}
	return &fr, stopJSON(sr)
}
