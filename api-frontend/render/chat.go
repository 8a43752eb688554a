package render

import (
	"encoding/json"

	"github.com/sluice-llm/sluice/outputproc"
)

// Chat renders /v1/chat/completions: chat.completion.chunk events, one
// choice per chunk, the role with a choice's first chunk, and a
// chat.completion body.
type Chat struct {
	openAIStream
	calls []ToolCallDelta // reused per chunk
}

// NewChat returns the chat renderer of one request.
func NewChat(r Request) *Chat {
	c := new(Chat)
	c.Init(r)
	return c
}

// Init sets c up as NewChat does, in place (a caller can keep the renderer
// in its own per-request struct).
func (c *Chat) Init(r Request) {
	*c = Chat{}
	c.init(r, "chat.completion.chunk")
}

// AppendDelta implements Renderer.
func (c *Chat) AppendDelta(dst []byte, d *outputproc.Delta) []byte {
	finish, stop := finishName(d)
	hasTokens := len(d.TokenIDs) > 0 && c.r.Logprobs
	if !d.First && d.Content == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 && finish == "" && !hasTokens {
		return dst // nothing to send (held back by a parser)
	}
	c.calls = c.calls[:0]
	for _, t := range d.ToolCalls {
		c.calls = append(c.calls, ToolCallDelta{Index: t.Index, ID: t.ID, Name: t.Name, Arguments: t.Arguments})
	}
	ch := ChatChoice{
		Index:          d.Index,
		Content:        d.Content,
		HasContent:     d.Content != "" || (d.First && len(d.ToolCalls) == 0 && d.Reasoning == ""),
		Reasoning:      d.Reasoning,
		HasReasoning:   d.Reasoning != "",
		ReasoningField: c.r.ReasoningField,
		ToolCalls:      c.calls,
		FinishReason:   finish,
		StopReason:     stop,
	}
	if d.First {
		ch.Role = "assistant"
	}
	var lp Logprobs
	if c.r.Logprobs {
		lp = Logprobs{TokenIDs: d.TokenIDs, Entries: d.Logprobs, Tok: c.r.Tok}
		ch.Logprobs = &lp
	}
	var u *Usage
	if c.r.ContinuousUsage {
		u = usage(&d.Usage)
	}
	return AppendChatChunk(dst, &c.hdr, &ch, u)
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessageJSON struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Reasoning        *string        `json:"reasoning,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls"`
}

type chatChoiceJSON struct {
	Index        int             `json:"index"`
	Message      chatMessageJSON `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

// Body implements Renderer: a chat.completion object.
func (c *Chat) Body(choices []*outputproc.Accumulator, u *outputproc.Usage) []byte {
	out := make([]chatChoiceJSON, 0, len(choices))
	for _, a := range choices {
		fr, sr := bodyFinish(a)
		cj := chatChoiceJSON{Index: a.Index, FinishReason: fr, StopReason: sr, Logprobs: json.RawMessage("null")}
		cj.Message.Role = "assistant"
		text := a.Content.String()
		if text != "" || len(a.ToolCalls) == 0 {
			cj.Message.Content = &text
		}
		if c.r.Reasoning {
			rs := a.Reasoning.String()
			if c.r.ReasoningField == "reasoning_content" {
				cj.Message.ReasoningContent = &rs
			} else {
				cj.Message.Reasoning = &rs
			}
		}
		cj.Message.ToolCalls = []toolCallJSON{}
		for _, t := range a.ToolCalls {
			var tc toolCallJSON
			tc.ID, tc.Type = t.ID, "function"
			tc.Function.Name, tc.Function.Arguments = t.Name, t.Arguments
			cj.Message.ToolCalls = append(cj.Message.ToolCalls, tc)
		}
		if c.r.Logprobs {
			cj.Logprobs = AppendChatLogprobs(nil, &Logprobs{TokenIDs: a.TokenIDs, Entries: a.Logprobs, Tok: c.r.Tok})
		}
		out = append(out, cj)
	}
	return newResponse(&c.r, "chat.completion", u, out)
}
