package anthropic

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/outputproc"
)

// Meta is what a message object says about its request.
type Meta struct {
	ID    string // msg_…
	Model string
	// Seal makes a thinking block's signature from its text (nil: empty
	// signatures).
	Seal func(string) string
	// NewID makes tool_use ids (toolu_…) when the parser gave none.
	NewID func(prefix string) string
}

// blockKind is a content block's type.
type blockKind uint8

const (
	blockText blockKind = iota
	blockThinking
	blockToolUse
)

// contentBlock is one content block as it accumulates.
type contentBlock struct {
	kind  blockKind
	text  []byte // text, thinking, or the tool input JSON
	id    string
	name  string
	index int // tool call index
}

// Stream renders one message: Anthropic's SSE events as deltas arrive, and
// the message object (a non-streamed request's body). It implements
// render.Renderer and is not safe for concurrent use.
type Stream struct {
	m       *Meta
	blocks  []contentBlock
	open    int // index of the open block; -1 when none
	started bool
	finish  outputproc.Finish
	events  int
	input   outputproc.Usage // prompt and cached tokens, from the first delta
}

var _ render.Renderer = (*Stream)(nil)

// NewStream returns the renderer of one message.
func NewStream(m *Meta) *Stream { return &Stream{m: m, open: -1} }

// Events returns the number of SSE events appended since the last call.
func (s *Stream) Events() int {
	n := s.events
	s.events = 0
	return n
}

func (s *Stream) event(dst []byte, typ string) []byte {
	s.events++
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

func end(dst []byte) []byte { return append(dst, "}\n\n"...) }

// Start appends message_start; u gives the prompt's tokens.
func (s *Stream) Start(dst []byte, u *outputproc.Usage) []byte {
	s.started = true
	s.input = *u
	dst = s.event(dst, "message_start")
	dst = append(dst, `,"message":{"id":`...)
	dst = openai.AppendString(dst, s.m.ID)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = openai.AppendString(dst, s.m.Model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = s.appendUsage(dst, 0)
	dst = append(dst, '}')
	return end(dst)
}

// Ping appends a ping event (sent while a long prefill runs), after
// message_start when that is not out yet (its usage then counts the
// prompt's promptTokens, none of them cached).
func (s *Stream) Ping(dst []byte, promptTokens int) []byte {
	if !s.started {
		dst = s.Start(dst, &outputproc.Usage{PromptTokens: promptTokens})
	}
	return end(s.event(dst, "ping"))
}

// AppendDelta implements render.Renderer.
func (s *Stream) AppendDelta(dst []byte, d *outputproc.Delta) []byte {
	if !s.started {
		dst = s.Start(dst, &d.Usage)
	}
	if d.Reasoning != "" {
		dst = s.text(dst, blockThinking, d.Reasoning)
	}
	if d.Content != "" {
		dst = s.text(dst, blockText, d.Content)
	}
	for _, c := range d.ToolCalls {
		dst = s.call(dst, c)
	}
	if d.Finished() {
		s.finish = d.Finish
	}
	return dst
}

func (s *Stream) text(dst []byte, k blockKind, delta string) []byte {
	if s.open < 0 || s.blocks[s.open].kind != k {
		dst = s.closeOpen(dst)
		dst = s.add(dst, contentBlock{kind: k})
	}
	b := &s.blocks[s.open]
	b.text = append(b.text, delta...)
	dst = s.event(dst, "content_block_delta")
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(s.open), 10)
	if k == blockText {
		dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	} else {
		dst = append(dst, `,"delta":{"type":"thinking_delta","thinking":`...)
	}
	dst = openai.AppendString(dst, delta)
	dst = append(dst, '}')
	return end(dst)
}

func (s *Stream) call(dst []byte, c outputproc.ToolCallDelta) []byte {
	if s.open < 0 || s.blocks[s.open].kind != blockToolUse || s.blocks[s.open].index != c.Index {
		dst = s.closeOpen(dst)
		id := c.ID
		if id == "" || !bytes.HasPrefix([]byte(id), []byte("toolu_")) {
			id = s.m.NewID("toolu_")
		}
		dst = s.add(dst, contentBlock{kind: blockToolUse, id: id, name: c.Name, index: c.Index})
	}
	if c.Arguments == "" {
		return dst
	}
	b := &s.blocks[s.open]
	b.text = append(b.text, c.Arguments...)
	dst = s.event(dst, "content_block_delta")
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(s.open), 10)
	dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":`...)
	dst = openai.AppendString(dst, c.Arguments)
	dst = append(dst, '}')
	return end(dst)
}

// add opens a content block.
func (s *Stream) add(dst []byte, b contentBlock) []byte {
	s.blocks = append(s.blocks, b)
	s.open = len(s.blocks) - 1
	dst = s.event(dst, "content_block_start")
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(s.open), 10)
	dst = append(dst, `,"content_block":`...)
	switch b.kind {
	case blockText:
		dst = append(dst, `{"type":"text","text":""}`...)
	case blockThinking:
		dst = append(dst, `{"type":"thinking","thinking":"","signature":""}`...)
	case blockToolUse:
		dst = append(dst, `{"type":"tool_use","id":`...)
		dst = openai.AppendString(dst, b.id)
		dst = append(dst, `,"name":`...)
		dst = openai.AppendString(dst, b.name)
		dst = append(dst, `,"input":{}}`...)
	}
	return end(dst)
}

// closeOpen ends the open block (a thinking block gets its signature
// first).
func (s *Stream) closeOpen(dst []byte) []byte {
	if s.open < 0 {
		return dst
	}
	i := s.open
	s.open = -1
	if s.blocks[i].kind == blockThinking {
		dst = s.event(dst, "content_block_delta")
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"delta":{"type":"signature_delta","signature":`...)
		dst = openai.AppendString(dst, s.signature(i))
		dst = append(dst, '}')
		dst = end(dst)
	}
	dst = s.event(dst, "content_block_stop")
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	return end(dst)
}

func (s *Stream) signature(i int) string {
	if s.m.Seal == nil {
		return ""
	}
	return s.m.Seal(string(s.blocks[i].text))
}

// stopReason spells the finish for Anthropic.
func (s *Stream) stopReason() (reason string, seq *string) {
	switch s.finish.Reason {
	case outputproc.FinishLength:
		return "max_tokens", nil
	case outputproc.FinishToolCalls:
		return "tool_use", nil
	}
	if s.finish.Stop.IsText {
		t := s.finish.Stop.Text
		return "stop_sequence", &t
	}
	for _, b := range s.blocks {
		if b.kind == blockToolUse {
			return "tool_use", nil
		}
	}
	return "end_turn", nil
}

func (s *Stream) appendUsage(dst []byte, output int) []byte {
	in := s.input.PromptTokens - s.input.CachedTokens
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(in), 10)
	dst = append(dst, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(s.input.CachedTokens), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(output), 10)
	return append(dst, '}')
}

func appendStop(dst []byte, reason string, seq *string) []byte {
	dst = append(dst, `"stop_reason":`...)
	dst = openai.AppendString(dst, reason)
	dst = append(dst, `,"stop_sequence":`...)
	if seq != nil {
		return openai.AppendString(dst, *seq)
	}
	return append(dst, "null"...)
}

// AppendEnd implements render.Renderer: the open block ends, then
// message_delta (stop reason, usage) and message_stop.
func (s *Stream) AppendEnd(dst []byte, u *outputproc.Usage) []byte {
	if !s.started {
		dst = s.Start(dst, u)
	}
	dst = s.closeOpen(dst)
	reason, seq := s.stopReason()
	dst = s.event(dst, "message_delta")
	dst = append(dst, `,"delta":{`...)
	dst = appendStop(dst, reason, seq)
	dst = append(dst, `},"usage":{"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
	dst = append(dst, '}')
	dst = end(dst)
	return end(s.event(dst, "message_stop"))
}

// AppendError implements render.Renderer: the open block ends (its text
// was sent), then an error event.
func (s *Stream) AppendError(dst []byte, e *openai.Error) []byte {
	dst = s.closeOpen(dst)
	s.events++
	dst = append(dst, "event: error\ndata: "...)
	dst = AppendError(dst, e)
	return append(dst, "\n\n"...)
}

// Body implements render.Renderer: the message object, built through the
// same block machinery as a stream (thinking, then text, then tool uses).
func (s *Stream) Body(choices []*outputproc.Accumulator, u *outputproc.Usage) []byte {
	s.started, s.input = true, *u
	if len(choices) > 0 {
		a := choices[0]
		d := outputproc.Delta{Content: a.Content.String(), Reasoning: a.Reasoning.String(), ToolCalls: a.ToolCalls, Finish: a.Finish}
		s.AppendDelta(nil, &d)
	}
	s.closeOpen(nil)
	dst := append([]byte(nil), `{"id":`...)
	dst = openai.AppendString(dst, s.m.ID)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = openai.AppendString(dst, s.m.Model)
	dst = append(dst, `,"content":[`...)
	for i, b := range s.blocks {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch b.kind {
		case blockText:
			dst = append(dst, `{"type":"text","text":`...)
			dst = openai.AppendBytesString(dst, b.text)
		case blockThinking:
			dst = append(dst, `{"type":"thinking","thinking":`...)
			dst = openai.AppendBytesString(dst, b.text)
			dst = append(dst, `,"signature":`...)
			dst = openai.AppendString(dst, s.signature(i))
		case blockToolUse:
			dst = append(dst, `{"type":"tool_use","id":`...)
			dst = openai.AppendString(dst, b.id)
			dst = append(dst, `,"name":`...)
			dst = openai.AppendString(dst, b.name)
			dst = append(dst, `,"input":`...)
			dst = appendInput(dst, b.text)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, "],"...)
	reason, seq := s.stopReason()
	dst = appendStop(dst, reason, seq)
	dst = append(dst, `,"usage":`...)
	dst = s.appendUsage(dst, u.CompletionTokens)
	return append(dst, '}')
}

// appendInput appends a tool call's arguments as the input object; text
// that is not a JSON object (a model's malformed arguments) is kept as
// {"_raw": text} rather than lost.
func appendInput(dst, args []byte) []byte {
	var v map[string]json.RawMessage
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return append(dst, "{}"...)
	}
	if json.Unmarshal(trimmed, &v) != nil {
		dst = append(dst, `{"_raw":`...)
		dst = openai.AppendBytesString(dst, args)
		return append(dst, '}')
	}
	var buf bytes.Buffer
	if json.Compact(&buf, trimmed) != nil {
		return append(dst, "{}"...)
	}
	return append(dst, buf.Bytes()...)
}
