package render

import (
	"strconv"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/ipc"
)

// TokenText gives the text of a token for logprobs (tokenizer.Tokenizer
// satisfies it).
type TokenText interface {
	TokenBytes(id int32) []byte
}

// StopReason is a choice's stop_reason: null, a token id, or a stop string.
type StopReason struct {
	Token   int32  // valid when IsToken
	Text    string // valid when IsText
	IsToken bool
	IsText  bool
}

func (s StopReason) appendJSON(dst []byte) []byte {
	switch {
	case s.IsText:
		return openai.AppendString(dst, s.Text)
	case s.IsToken:
		return strconv.AppendInt(dst, int64(s.Token), 10)
	}
	return append(dst, "null"...)
}

// Usage is the token accounting of a request.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
}

// AppendJSON appends the usage object.
func (u *Usage) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens+u.CompletionTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CachedTokens), 10)
	return append(dst, "}}"...)
}

// StreamHeader is the fixed start of every chunk of one stream:
// `data: {"id":…,"object":…,"created":…,"model":…,`.
type StreamHeader struct {
	prefix []byte
}

// Prefix returns the rendered fixed part (read only).
func (h *StreamHeader) Prefix() []byte { return h.prefix }

// NewStreamHeader renders the fixed part of a stream's chunks.
func NewStreamHeader(id, object string, created int64, model string) StreamHeader {
	// Sized once: the appends below would otherwise grow it three or four
	// times per stream (plain strings; escapes only grow it further).
	b := make([]byte, 0, len(`data: {"id":,"object":,"created":,"model":,`)+6+20+len(id)+len(object)+len(model))
	b = append(b, `data: {"id":`...)
	b = openai.AppendString(b, id)
	b = append(b, `,"object":`...)
	b = openai.AppendString(b, object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = openai.AppendString(b, model)
	b = append(b, ',')
	return StreamHeader{prefix: b}
}

// Logprobs is the logprob data of the tokens of one chunk.
type Logprobs struct {
	TokenIDs []int32
	Entries  []ipc.TokenLogprobs // one per token id
	Tok      TokenText
	// TextOffset is the character offset of the first token in the text
	// streamed so far (completions' legacy text_offset).
	TextOffset int
}

// ToolCallDelta is one streamed tool call fragment.
type ToolCallDelta struct {
	Index     int
	ID        string // first fragment only
	Name      string // first fragment only
	Arguments string
}

// ChatChoice is the content of one chat chunk.
type ChatChoice struct {
	Index          int
	Role           string // "" for none
	Content        string
	HasContent     bool
	Reasoning      string
	HasReasoning   bool
	ReasoningField string // "reasoning" (default) or "reasoning_content"
	ToolCalls      []ToolCallDelta
	Logprobs       *Logprobs
	FinishReason   string // "" while running
	StopReason     StopReason
}

// AppendChatChunk appends one `data: {…}\n\n` chat completion chunk.
func AppendChatChunk(dst []byte, h *StreamHeader, c *ChatChoice, usage *Usage) []byte {
	dst = append(dst, h.prefix...)
	dst = append(dst, `"choices":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(c.Index), 10)
	dst = append(dst, `,"delta":{`...)
	sep := false
	if c.Role != "" {
		dst = append(dst, `"role":`...)
		dst = openai.AppendString(dst, c.Role)
		sep = true
	}
	if c.HasContent {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"content":`...)
		dst = openai.AppendString(dst, c.Content)
		sep = true
	}
	if c.HasReasoning {
		if sep {
			dst = append(dst, ',')
		}
		f := c.ReasoningField
		if f == "" {
			f = "reasoning"
		}
		dst = append(dst, '"')
		dst = append(dst, f...)
		dst = append(dst, `":`...)
		dst = openai.AppendString(dst, c.Reasoning)
		sep = true
	}
	if len(c.ToolCalls) > 0 {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"tool_calls":[`...)
		for i := range c.ToolCalls {
			t := &c.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(t.Index), 10)
			if t.ID != "" {
				dst = append(dst, `,"id":`...)
				dst = openai.AppendString(dst, t.ID)
				dst = append(dst, `,"type":"function"`...)
			}
			dst = append(dst, `,"function":{`...)
			if t.Name != "" {
				dst = append(dst, `"name":`...)
				dst = openai.AppendString(dst, t.Name)
				dst = append(dst, ',')
			}
			dst = append(dst, `"arguments":`...)
			dst = openai.AppendString(dst, t.Arguments)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":`...)
	if c.Logprobs != nil {
		dst = AppendChatLogprobs(dst, c.Logprobs)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	if c.FinishReason == "" {
		dst = append(dst, "null"...)
	} else {
		dst = openai.AppendString(dst, c.FinishReason)
		dst = append(dst, `,"stop_reason":`...)
		dst = c.StopReason.appendJSON(dst)
	}
	dst = append(dst, "}]"...)
	if usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = usage.AppendJSON(dst)
	}
	return append(dst, "}\n\n"...)
}

// AppendChatLogprobs appends chat logprobs: {"content":[{token, logprob, bytes, top_logprobs}…]}.
func AppendChatLogprobs(dst []byte, l *Logprobs) []byte {
	dst = append(dst, `{"content":[`...)
	for i, id := range l.TokenIDs {
		if i >= len(l.Entries) {
			break
		}
		e := &l.Entries[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendChatLogprobEntry(dst, l.Tok, id, e.Logprob)
		dst = dst[:len(dst)-1] // reopen the entry object
		dst = append(dst, `,"top_logprobs":[`...)
		for j, tid := range e.TopIDs {
			if j >= len(e.TopLogprobs) {
				break
			}
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendChatLogprobEntry(dst, l.Tok, tid, e.TopLogprobs[j])
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

func appendChatLogprobEntry(dst []byte, tok TokenText, id int32, lp float32) []byte {
	b := tok.TokenBytes(id)
	dst = append(dst, `{"token":`...)
	dst = openai.AppendBytesString(dst, b)
	dst = append(dst, `,"logprob":`...)
	dst = openai.AppendFloat(dst, float64(lp), 32)
	dst = append(dst, `,"bytes":`...)
	dst = openai.AppendByteArray(dst, b)
	return append(dst, '}')
}

// CompletionChoice is the content of one completions chunk.
type CompletionChoice struct {
	Index        int
	Text         string
	Logprobs     *Logprobs
	FinishReason string
	StopReason   StopReason
}

// AppendCompletionChunk appends one `data: {…}\n\n` text_completion chunk.
func AppendCompletionChunk(dst []byte, h *StreamHeader, c *CompletionChoice, usage *Usage) []byte {
	dst = append(dst, h.prefix...)
	dst = append(dst, `"choices":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(c.Index), 10)
	dst = append(dst, `,"text":`...)
	dst = openai.AppendString(dst, c.Text)
	dst = append(dst, `,"logprobs":`...)
	if c.Logprobs != nil {
		dst = AppendLegacyLogprobs(dst, c.Logprobs)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"finish_reason":`...)
	if c.FinishReason == "" {
		dst = append(dst, "null"...)
	} else {
		dst = openai.AppendString(dst, c.FinishReason)
	}
	dst = append(dst, `,"stop_reason":`...)
	dst = c.StopReason.appendJSON(dst)
	dst = append(dst, "}]"...)
	if usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = usage.AppendJSON(dst)
	}
	return append(dst, "}\n\n"...)
}

// AppendLegacyLogprobs appends completions' logprobs object:
// {"text_offset":[…],"token_logprobs":[…],"tokens":[…],"top_logprobs":[{tok: lp}…]}.
func AppendLegacyLogprobs(dst []byte, l *Logprobs) []byte {
	n := len(l.TokenIDs)
	if len(l.Entries) < n {
		n = len(l.Entries)
	}
	dst = append(dst, `{"text_offset":[`...)
	off := l.TextOffset
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(off), 10)
		off += utf8.RuneCount(l.Tok.TokenBytes(l.TokenIDs[i]))
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = openai.AppendFloat(dst, float64(l.Entries[i].Logprob), 32)
	}
	dst = append(dst, `],"tokens":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = openai.AppendBytesString(dst, l.Tok.TokenBytes(l.TokenIDs[i]))
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		e := &l.Entries[i]
		dst = append(dst, '{')
		for j, tid := range e.TopIDs {
			if j >= len(e.TopLogprobs) {
				break
			}
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = openai.AppendBytesString(dst, l.Tok.TokenBytes(tid))
			dst = append(dst, ':')
			dst = openai.AppendFloat(dst, float64(e.TopLogprobs[j]), 32)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// AppendUsageChunk appends the final `choices: []` chunk carrying usage.
func AppendUsageChunk(dst []byte, h *StreamHeader, u *Usage) []byte {
	dst = append(dst, h.prefix...)
	dst = append(dst, `"choices":[],"usage":`...)
	dst = u.AppendJSON(dst)
	return append(dst, "}\n\n"...)
}

// AppendErrorEvent appends a mid-stream error event `data: {"error":…}`.
func AppendErrorEvent(dst []byte, e *openai.Error) []byte {
	dst = append(dst, "data: "...)
	dst = e.AppendJSON(dst)
	return append(dst, "\n\n"...)
}

// Done is the event that ends every stream.
const Done = "data: [DONE]\n\n"
