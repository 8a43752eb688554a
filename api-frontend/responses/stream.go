package responses

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/outputproc"
)

// Meta is what a response object says about its request.
type Meta struct {
	ID                 string // resp_…
	Model              string
	CreatedAt          int64
	Instructions       json.RawMessage // as given (null when none)
	PreviousResponseID string
	Store              bool
	Metadata           map[string]string
	MaxOutputTokens    *int64
	Temperature        *float64
	TopP               *float64
	ToolChoice         json.RawMessage // as given (default "auto")
	Tools              []json.RawMessage
	ParallelToolCalls  bool
	Text               json.RawMessage // the text object (default {"format":{"type":"text"}})
	Reasoning          json.RawMessage // the reasoning object (default null)
	Truncation         string
	User               string
	// IncludeEncrypted adds encrypted_content to reasoning items, sealed
	// with Seal.
	IncludeEncrypted bool
	Seal             func(string) string
	// NewID makes item ids (msg_…, rs_…, fc_…, call_…) from a prefix.
	NewID func(prefix string) string
	// CountTokens counts the tokens of a text (usage's reasoning_tokens);
	// nil reports 0.
	CountTokens func(string) int
}

// Finish is how generation ended.
type Finish struct {
	// Reason is chat's finish reason: stop, length or tool_calls.
	Reason          string
	Usage           outputproc.Usage
	ReasoningTokens int
}

// kind is an output item's type.
type kind uint8

const (
	kindMessage kind = iota
	kindReasoning
	kindCall
)

// outItem is one output item as it accumulates.
type outItem struct {
	kind   kind
	id     string
	text   []byte // message text, reasoning text, or call arguments
	callID string
	name   string
	index  int // tool call index (calls)
	done   bool
}

// Stream renders one response: typed SSE events as deltas arrive (Append),
// and the final response object (Object), which response.completed carries
// and a non-streamed request returns. It is not safe for concurrent use.
type Stream struct {
	m      *Meta
	seq    int
	items  []outItem
	open   int // index in items of the open item; -1 when none
	events int // events appended since the last Events call
	status string
	// started: response.created is out; finish: the completion's finish
	// (from its last delta); reasoning: all reasoning text (usage).
	started   bool
	finish    outputproc.FinishReason
	reasoning []byte
	final     []byte // the final response object
}

var _ render.Renderer = (*Stream)(nil)

// AppendDelta implements render.Renderer: response.created and
// response.in_progress before the first delta, then the delta's events.
func (s *Stream) AppendDelta(dst []byte, d *outputproc.Delta) []byte {
	if !s.started {
		dst = s.Start(dst)
	}
	dst = s.Append(dst, d.Content, d.Reasoning, d.ToolCalls)
	if d.Finished() {
		s.finish = d.Finish.Reason
	}
	return dst
}

// finishOf builds the Finish for usage u.
func (s *Stream) finishOf(u *outputproc.Usage) *Finish {
	f := &Finish{Reason: s.finish.String(), Usage: *u}
	if s.m.CountTokens != nil && len(s.reasoning) > 0 {
		f.ReasoningTokens = s.m.CountTokens(string(s.reasoning))
	}
	return f
}

// AppendEnd implements render.Renderer.
func (s *Stream) AppendEnd(dst []byte, u *outputproc.Usage) []byte {
	if !s.started {
		dst = s.Start(dst)
	}
	return s.End(dst, s.finishOf(u))
}

// AppendError implements render.Renderer: every item generated so far is
// closed (its text was sent), then response.failed.
func (s *Stream) AppendError(dst []byte, e *openai.Error) []byte {
	if !s.started {
		dst = s.Start(dst)
	}
	return s.Fail(dst, e, nil)
}

// Body implements render.Renderer: the response object, built by feeding
// the accumulated completion through the same item machinery as a stream
// (reasoning, then text, then calls), so both agree.
func (s *Stream) Body(choices []*outputproc.Accumulator, u *outputproc.Usage) []byte {
	if len(choices) > 0 {
		a := choices[0]
		s.started = true
		s.Append(nil, a.Content.String(), a.Reasoning.String(), a.ToolCalls)
		s.finish = a.Finish.Reason
	}
	s.final = s.Object(s.finishOf(u))
	return s.final
}

// NewStream returns a renderer for one response.
func NewStream(m *Meta) *Stream {
	return &Stream{m: m, open: -1, status: "in_progress"}
}

// Events returns the number of SSE events appended since the last call.
func (s *Stream) Events() int {
	n := s.events
	s.events = 0
	return n
}

// event appends "event: typ" and the data line head up to the
// sequence_number; the caller appends the remaining fields and ends it with
// s.end.
func (s *Stream) event(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(s.seq), 10)
	s.seq++
	s.events++
	return dst
}

func end(dst []byte) []byte { return append(dst, "}\n\n"...) }

// Start appends response.created and response.in_progress.
func (s *Stream) Start(dst []byte) []byte {
	s.started = true
	for _, t := range []string{"response.created", "response.in_progress"} {
		dst = s.event(dst, t)
		dst = append(dst, `,"response":`...)
		dst = s.appendObject(dst, nil)
		dst = end(dst)
	}
	return dst
}

// Append appends the events for one delta of content, reasoning and tool
// call fragments (in that order of arrival within the delta: reasoning,
// then content, then calls).
func (s *Stream) Append(dst []byte, content, reasoning string, calls []outputproc.ToolCallDelta) []byte {
	if reasoning != "" {
		dst = s.text(dst, kindReasoning, reasoning)
	}
	if content != "" {
		dst = s.text(dst, kindMessage, content)
	}
	for _, c := range calls {
		dst = s.call(dst, c)
	}
	return dst
}

// text appends a text delta to the open item of kind k, opening one.
func (s *Stream) text(dst []byte, k kind, delta string) []byte {
	if s.open < 0 || s.items[s.open].kind != k {
		dst = s.closeOpen(dst)
		dst = s.add(dst, outItem{kind: k})
	}
	it := &s.items[s.open]
	it.text = append(it.text, delta...)
	if k == kindReasoning {
		s.reasoning = append(s.reasoning, delta...)
	}
	if k == kindMessage {
		dst = s.event(dst, "response.output_text.delta")
	} else {
		dst = s.event(dst, "response.reasoning_text.delta")
	}
	dst = s.itemRef(dst, s.open, true)
	dst = append(dst, `,"delta":`...)
	dst = openai.AppendString(dst, delta)
	if k == kindMessage {
		dst = append(dst, `,"logprobs":[]`...)
	}
	return end(dst)
}

// call appends a tool call fragment.
func (s *Stream) call(dst []byte, c outputproc.ToolCallDelta) []byte {
	if s.open < 0 || s.items[s.open].kind != kindCall || s.items[s.open].index != c.Index {
		dst = s.closeOpen(dst)
		id := c.ID
		if id == "" {
			id = s.m.NewID("call_")
		}
		dst = s.add(dst, outItem{kind: kindCall, index: c.Index, callID: id, name: c.Name})
	}
	if c.Arguments == "" {
		return dst
	}
	it := &s.items[s.open]
	it.text = append(it.text, c.Arguments...)
	dst = s.event(dst, "response.function_call_arguments.delta")
	dst = s.itemRef(dst, s.open, false)
	dst = append(dst, `,"delta":`...)
	dst = openai.AppendString(dst, c.Arguments)
	return end(dst)
}

// itemRef appends item_id, output_index and (for text) content_index.
func (s *Stream) itemRef(dst []byte, i int, content bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = openai.AppendString(dst, s.items[i].id)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	if content {
		dst = append(dst, `,"content_index":0`...)
	}
	return dst
}

// add opens a new output item.
func (s *Stream) add(dst []byte, it outItem) []byte {
	switch it.kind {
	case kindMessage:
		it.id = s.m.NewID("msg_")
	case kindReasoning:
		it.id = s.m.NewID("rs_")
	case kindCall:
		it.id = s.m.NewID("fc_")
	}
	s.items = append(s.items, it)
	s.open = len(s.items) - 1
	dst = s.event(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(s.open), 10)
	dst = append(dst, `,"item":`...)
	dst = s.appendItem(dst, s.open)
	dst = end(dst)
	if it.kind == kindMessage {
		dst = s.event(dst, "response.content_part.added")
		dst = s.itemRef(dst, s.open, true)
		dst = append(dst, `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
		dst = end(dst)
	}
	return dst
}

// closeOpen appends the done events of the open item.
func (s *Stream) closeOpen(dst []byte) []byte {
	if s.open < 0 {
		return dst
	}
	i := s.open
	it := &s.items[i]
	it.done = true
	s.open = -1
	switch it.kind {
	case kindMessage:
		dst = s.event(dst, "response.output_text.done")
		dst = s.itemRef(dst, i, true)
		dst = append(dst, `,"text":`...)
		dst = openai.AppendBytesString(dst, it.text)
		dst = append(dst, `,"logprobs":[]`...)
		dst = end(dst)
		dst = s.event(dst, "response.content_part.done")
		dst = s.itemRef(dst, i, true)
		dst = append(dst, `,"part":`...)
		dst = appendTextPart(dst, it.text)
		dst = end(dst)
	case kindReasoning:
		dst = s.event(dst, "response.reasoning_text.done")
		dst = s.itemRef(dst, i, true)
		dst = append(dst, `,"text":`...)
		dst = openai.AppendBytesString(dst, it.text)
		dst = end(dst)
	case kindCall:
		dst = s.event(dst, "response.function_call_arguments.done")
		dst = s.itemRef(dst, i, false)
		dst = append(dst, `,"name":`...)
		dst = openai.AppendString(dst, it.name)
		dst = append(dst, `,"arguments":`...)
		dst = openai.AppendBytesString(dst, it.text)
		dst = end(dst)
	}
	dst = s.event(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `,"item":`...)
	dst = s.appendItem(dst, i)
	return end(dst)
}

func appendTextPart(dst, text []byte) []byte {
	dst = append(dst, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	dst = openai.AppendBytesString(dst, text)
	return append(dst, '}')
}

// appendItem appends output item i as the API shapes it.
func (s *Stream) appendItem(dst []byte, i int) []byte {
	it := &s.items[i]
	status := `"in_progress"`
	if it.done {
		status = `"completed"`
	}
	switch it.kind {
	case kindMessage:
		dst = append(dst, `{"id":`...)
		dst = openai.AppendString(dst, it.id)
		dst = append(dst, `,"type":"message","status":`...)
		dst = append(dst, status...)
		dst = append(dst, `,"role":"assistant","content":[`...)
		if it.done {
			dst = appendTextPart(dst, it.text)
		}
		return append(dst, "]}"...)
	case kindReasoning:
		dst = append(dst, `{"id":`...)
		dst = openai.AppendString(dst, it.id)
		dst = append(dst, `,"type":"reasoning","summary":[],"content":[`...)
		if it.done {
			dst = append(dst, `{"type":"reasoning_text","text":`...)
			dst = openai.AppendBytesString(dst, it.text)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		if it.done && s.m.IncludeEncrypted && s.m.Seal != nil {
			dst = append(dst, `,"encrypted_content":`...)
			dst = openai.AppendString(dst, s.m.Seal(string(it.text)))
		}
		return append(dst, '}')
	default:
		dst = append(dst, `{"id":`...)
		dst = openai.AppendString(dst, it.id)
		dst = append(dst, `,"type":"function_call","status":`...)
		dst = append(dst, status...)
		dst = append(dst, `,"call_id":`...)
		dst = openai.AppendString(dst, it.callID)
		dst = append(dst, `,"name":`...)
		dst = openai.AppendString(dst, it.name)
		dst = append(dst, `,"arguments":`...)
		if it.done {
			dst = openai.AppendBytesString(dst, it.text)
		} else {
			dst = append(dst, `""`...)
		}
		return append(dst, '}')
	}
}

// End closes the open item and appends the final event
// (response.completed, or response.incomplete when the output hit
// max_output_tokens).
func (s *Stream) End(dst []byte, f *Finish) []byte {
	dst = s.closeOpen(dst)
	s.status = "completed"
	typ := "response.completed"
	if f.Reason == "length" {
		s.status = "incomplete"
		typ = "response.incomplete"
	}
	s.open = -1
	s.final = s.appendObject(nil, f)
	dst = s.event(dst, typ)
	dst = append(dst, `,"response":`...)
	dst = append(dst, s.final...)
	return end(dst)
}

// Final returns the final response object once End ran or Body built it
// (nil before, and after a failure).
func (s *Stream) Final() []byte { return s.final }

// Fail closes the open item (everything generated so far has been sent)
// and appends response.failed with e.
func (s *Stream) Fail(dst []byte, e *openai.Error, f *Finish) []byte {
	dst = s.closeOpen(dst)
	s.status = "failed"
	dst = s.event(dst, "response.failed")
	dst = append(dst, `,"response":`...)
	dst = s.appendObjectErr(dst, f, e)
	return end(dst)
}

// Object returns the final response object (End or Fail must have run, or
// it reports in_progress).
func (s *Stream) Object(f *Finish) []byte {
	if s.status == "in_progress" {
		s.closeOpen(nil)
		s.status = "completed"
		if f != nil && f.Reason == "length" {
			s.status = "incomplete"
		}
	}
	return s.appendObject(nil, f)
}

// OutputItems returns the output items as Responses input items, for the
// history previous_response_id continues.
func (s *Stream) OutputItems() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(s.items))
	for i := range s.items {
		it := &s.items[i]
		done := it.done
		it.done = true
		out = append(out, s.appendItem(nil, i))
		it.done = done
	}
	return out
}

func (s *Stream) appendObject(dst []byte, f *Finish) []byte {
	return s.appendObjectErr(dst, f, nil)
}

// appendObjectErr appends the response object; f is nil until generation
// ends.
func (s *Stream) appendObjectErr(dst []byte, f *Finish, e *openai.Error) []byte {
	m := s.m
	dst = append(dst, `{"id":`...)
	dst = openai.AppendString(dst, m.ID)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, m.CreatedAt, 10)
	dst = append(dst, `,"status":`...)
	dst = openai.AppendString(dst, s.status)
	dst = append(dst, `,"background":false,"error":`...)
	if e != nil {
		dst = append(dst, `{"code":"server_error","message":`...)
		dst = openai.AppendString(dst, e.Message)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"incomplete_details":`...)
	if s.status == "incomplete" {
		dst = append(dst, `{"reason":"max_output_tokens"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"instructions":`...)
	dst = appendRaw(dst, m.Instructions, "null")
	dst = append(dst, `,"max_output_tokens":`...)
	if m.MaxOutputTokens != nil {
		dst = strconv.AppendInt(dst, *m.MaxOutputTokens, 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"model":`...)
	dst = openai.AppendString(dst, m.Model)
	dst = append(dst, `,"output":[`...)
	if f != nil || e != nil {
		for i := range s.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.appendItem(dst, i)
		}
	}
	dst = append(dst, `],"parallel_tool_calls":`...)
	dst = strconv.AppendBool(dst, m.ParallelToolCalls)
	dst = append(dst, `,"previous_response_id":`...)
	if m.PreviousResponseID != "" {
		dst = openai.AppendString(dst, m.PreviousResponseID)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"reasoning":`...)
	dst = appendRaw(dst, m.Reasoning, `{"effort":null,"summary":null}`)
	dst = append(dst, `,"store":`...)
	dst = strconv.AppendBool(dst, m.Store)
	dst = append(dst, `,"temperature":`...)
	dst = appendFloatOr(dst, m.Temperature, "1.0")
	dst = append(dst, `,"text":`...)
	dst = appendRaw(dst, m.Text, `{"format":{"type":"text"}}`)
	dst = append(dst, `,"tool_choice":`...)
	dst = appendRaw(dst, m.ToolChoice, `"auto"`)
	dst = append(dst, `,"tools":[`...)
	for i, t := range m.Tools {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, t...)
	}
	dst = append(dst, `],"top_p":`...)
	dst = appendFloatOr(dst, m.TopP, "1.0")
	dst = append(dst, `,"truncation":`...)
	dst = openai.AppendString(dst, m.Truncation)
	dst = append(dst, `,"usage":`...)
	if f == nil {
		dst = append(dst, "null"...)
	} else {
		u := f.Usage
		dst = append(dst, `{"input_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
		dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.CachedTokens), 10)
		dst = append(dst, `},"output_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
		dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
		dst = strconv.AppendInt(dst, int64(f.ReasoningTokens), 10)
		dst = append(dst, `},"total_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.PromptTokens+u.CompletionTokens), 10)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"user":`...)
	if m.User != "" {
		dst = openai.AppendString(dst, m.User)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"metadata":`...)
	if len(m.Metadata) == 0 {
		dst = append(dst, "{}"...)
	} else {
		b, _ := json.Marshal(m.Metadata)
		dst = append(dst, b...)
	}
	return append(dst, '}')
}

func appendRaw(dst []byte, raw json.RawMessage, def string) []byte {
	if isNull(raw) {
		return append(dst, def...)
	}
	return append(dst, compact(raw)...)
}

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

func appendFloatOr(dst []byte, f *float64, def string) []byte {
	if f == nil {
		return append(dst, def...)
	}
	return openai.AppendFloat(dst, *f, 64)
}
