// Package anthropic maps Anthropic Messages API requests (POST /v1/messages
// and /v1/messages/count_tokens) onto the chat completions request the rest
// of the frontend serves, renders results as Messages objects and stream
// events, and writes errors in Anthropic's shape
// ({"type":"error","error":{"type":…,"message":…}}).
//
// The mapping: `system` (a string or text blocks) becomes a leading system
// message; each message's blocks become chat messages (text; tool_use →
// the assistant's tool_calls with the input object as JSON arguments;
// tool_result → a tool message, prefixed "Error: " when is_error;
// thinking → the assistant's reasoning_content); `tools` become function
// tools (server tools such as web_search_* are left out and reported);
// `tool_choice` auto/any/tool/none → auto/required/named/none and
// disable_parallel_tool_use → parallel_tool_calls false; `stop_sequences`
// → stop; `thinking` enabled/disabled → the chat template's
// enable_thinking; `output_config.effort` → reasoning_effort. max_tokens is
// required; the server clamps it to the context left after the prompt.
// Everything else the SDKs send (cache_control, metadata, anthropic-beta
// features, context_management, …) is accepted and ignored.
package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/api-frontend/openai"
)

// Request is the body of POST /v1/messages. The embedded chat request
// carries the sampling extras the two APIs share by name (temperature,
// top_p, top_k, seed, …); the fields below shadow chat's.
type Request struct {
	openai.ChatRequest
	MaxTokens     *int64            `json:"max_tokens"`
	System        json.RawMessage   `json:"system"`
	Messages      []json.RawMessage `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	StopSequences []string          `json:"stop_sequences"`
	Thinking      json.RawMessage   `json:"thinking"`
	OutputConfig  json.RawMessage   `json:"output_config"`
	Metadata      json.RawMessage   `json:"metadata"`
	// Accepted and ignored.
	ContextManagement json.RawMessage `json:"context_management"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	Container         json.RawMessage `json:"container"`
	MCPServers        json.RawMessage `json:"mcp_servers"`
	// Shadow chat fields that are not Messages fields.
	Stop           json.RawMessage `json:"stop"`
	N              json.RawMessage `json:"n"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// Mapped is a Messages request translated for the chat path.
type Mapped struct {
	// Chat is the chat completions request to validate and run; its
	// max_completion_tokens is the request's max_tokens, before clamping.
	Chat openai.ChatRequest
	// MaxTokens is the request's max_tokens.
	MaxTokens int64
	// Thinking reports whether the request turned thinking on or off; nil
	// when it did not say.
	Thinking *bool
	// Dropped names the server tools left out of what the model sees.
	Dropped []string
	// ToolNames are the tools the model sees.
	ToolNames map[string]bool
}

// Decode parses a request body.
func Decode(body []byte) (*Request, *openai.Error) {
	var r Request
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, openai.BadRequest("", "request body is empty; expected a JSON object")
	}
	if body[0] != '{' {
		return nil, openai.BadRequest("", "request body must be a JSON object")
	}
	if err := json.Unmarshal(body, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			for _, p := range []string{"ChatRequest.", "commonRequest.", "structuredFields."} {
				field = strings.ReplaceAll(field, p, "")
			}
			if field == "" {
				field = "body"
			}
			return nil, openai.BadRequest(field, "%s: invalid type, got JSON %s", field, te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, openai.BadRequest("", "invalid JSON at offset %d: %v", se.Offset, se)
		}
		return nil, openai.BadRequest("", "invalid request body: %v", err)
	}
	return &r, nil
}

// Map translates r into a chat request. countOnly relaxes what only
// generation needs (max_tokens), for count_tokens.
func Map(r *Request, countOnly bool) (*Mapped, *openai.Error) {
	m := &Mapped{}
	c := &m.Chat
	*c = r.ChatRequest
	c.Messages, c.Tools, c.ToolChoice, c.Stop, c.N, c.ResponseFormat = nil, nil, nil, nil, nil, nil
	c.MaxTokens = nil
	if !isNull(r.N) {
		return nil, openai.BadRequest("n", "n is not a Messages API field")
	}
	switch {
	case r.MaxTokens == nil && !countOnly:
		return nil, openai.BadRequest("max_tokens", "max_tokens: Field required")
	case r.MaxTokens != nil && *r.MaxTokens < 1:
		return nil, openai.BadRequest("max_tokens", "max_tokens: must be at least 1, got %d", *r.MaxTokens)
	case r.MaxTokens != nil:
		m.MaxTokens = *r.MaxTokens
		v := *r.MaxTokens
		c.MaxCompletionTokens = &v
	}
	if len(r.StopSequences) > 0 {
		raw, _ := json.Marshal(r.StopSequences)
		c.Stop = raw
	}
	kw := map[string]any{}
	for k, v := range r.ChatTemplateKwargs {
		kw[k] = v
	}
	if !isNull(r.Thinking) {
		var t struct {
			Type         string `json:"type"`
			BudgetTokens *int64 `json:"budget_tokens"`
		}
		if err := json.Unmarshal(r.Thinking, &t); err != nil {
			return nil, openai.BadRequest("thinking", "thinking must be an object with a type")
		}
		switch t.Type {
		case "enabled":
			on := true
			m.Thinking = &on
			kw["enable_thinking"] = true
		case "disabled":
			off := false
			m.Thinking = &off
			kw["enable_thinking"] = false
		case "adaptive":
		default:
			return nil, openai.BadRequest("thinking.type", "thinking.type must be enabled, disabled or adaptive, got %q", t.Type)
		}
	}
	if !isNull(r.OutputConfig) {
		var oc struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(r.OutputConfig, &oc); err != nil {
			return nil, openai.BadRequest("output_config", "output_config must be an object")
		}
		if oc.Effort != nil {
			kw["reasoning_effort"] = *oc.Effort
		}
	}
	if len(kw) > 0 {
		c.ChatTemplateKwargs = kw
	}

	var out []openai.Message
	if !isNull(r.System) {
		s, ok := blocksText(r.System)
		if !ok {
			return nil, openai.BadRequest("system", "system: must be a string or a list of text blocks")
		}
		if s != "" {
			out = append(out, openai.Message{Role: "system", Content: s})
		}
	}
	if len(r.Messages) == 0 {
		return nil, openai.BadRequest("messages", "messages: at least one message is required")
	}
	seen := map[string]bool{}
	for i, raw := range r.Messages {
		ms, e := mapMessage(raw, i, seen)
		if e != nil {
			return nil, e
		}
		out = append(out, ms...)
	}
	for _, mm := range out {
		raw, err := json.Marshal(mm)
		if err != nil {
			return nil, openai.BadRequest("messages", "encode message: %v", err)
		}
		c.Messages = append(c.Messages, raw)
	}
	if e := m.mapTools(r); e != nil {
		return nil, e
	}
	return m, nil
}

// block is the union of the content block shapes this server reads.
type block struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  *string         `json:"thinking"`
}

// mapMessage turns message i into chat messages; seen holds the tool_use
// ids so far.
func mapMessage(raw json.RawMessage, i int, seen map[string]bool) ([]openai.Message, *openai.Error) {
	var h struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, openai.BadRequest("messages", "messages.%d: must be an object with role and content", i)
	}
	if h.Role != "user" && h.Role != "assistant" {
		return nil, openai.BadRequest("messages", "messages.%d.role: must be user or assistant, got %q", i, h.Role)
	}
	content := bytes.TrimSpace(h.Content)
	if len(content) > 0 && content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return nil, openai.BadRequest("messages", "messages.%d.content: invalid string", i)
		}
		return []openai.Message{{Role: h.Role, Content: s}}, nil
	}
	var blocks []block
	if err := json.Unmarshal(content, &blocks); err != nil || len(content) == 0 {
		return nil, openai.BadRequest("messages", "messages.%d.content: must be a string or a list of content blocks", i)
	}
	var out []openai.Message
	main := openai.Message{Role: h.Role}
	for j, b := range blocks {
		where := fmt.Sprintf("messages.%d.content.%d", i, j)
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, openai.BadRequest("messages", "%s.text: Field required", where)
			}
			main.Content += *b.Text
		case "thinking":
			if h.Role != "assistant" {
				return nil, openai.BadRequest("messages", "%s: thinking blocks belong to assistant messages", where)
			}
			if b.Thinking != nil {
				main.ReasoningContent += *b.Thinking
			}
		case "redacted_thinking":
			// Opaque to this server; the model never sees it.
		case "tool_use", "server_tool_use":
			if h.Role != "assistant" {
				return nil, openai.BadRequest("messages", "%s: tool_use blocks belong to assistant messages", where)
			}
			if b.ID == "" || b.Name == "" {
				return nil, openai.BadRequest("messages", "%s: tool_use needs id and name", where)
			}
			args := "{}"
			if !isNull(b.Input) {
				var v map[string]any
				if json.Unmarshal(b.Input, &v) != nil {
					return nil, openai.BadRequest("messages", "%s.input: must be an object", where)
				}
				args = string(bytes.TrimSpace(b.Input))
			}
			var tc openai.ToolCallItem
			tc.ID, tc.Type = b.ID, "function"
			tc.Function.Name, tc.Function.Arguments = b.Name, args
			main.ToolCalls = append(main.ToolCalls, tc)
			seen[b.ID] = true
		case "tool_result":
			if h.Role != "user" {
				return nil, openai.BadRequest("messages", "%s: tool_result blocks belong to user messages", where)
			}
			if !seen[b.ToolUseID] {
				return nil, openai.BadRequest("messages", "%s: tool_use_id %q does not match any tool_use block before it", where, b.ToolUseID)
			}
			text, ok := blocksText(b.Content)
			if !ok {
				return nil, openai.BadRequest("messages", "%s.content: must be a string or a list of text blocks", where)
			}
			if b.IsError {
				text = "Error: " + text
			}
			out = append(out, openai.Message{Role: "tool", Content: text, ToolCallID: b.ToolUseID})
		case "image", "document", "search_result":
			return nil, openai.BadRequest("messages", "%s: %s blocks are not supported by this server", where, b.Type)
		case "":
			return nil, openai.BadRequest("messages", "%s.type: Field required", where)
		default:
			// Server tool results and newer block types carry nothing the
			// model here can use.
		}
	}
	if main.Content != "" || len(main.ToolCalls) > 0 || main.ReasoningContent != "" || len(out) == 0 {
		out = append(out, main)
	}
	return out, nil
}

// blocksText reads a string or a list of text blocks (other block types,
// such as images, make it fail).
func blocksText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return "", true
	}
	switch raw[0] {
	case '"':
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	case '[':
		var bs []block
		if json.Unmarshal(raw, &bs) != nil {
			return "", false
		}
		var sb strings.Builder
		for _, b := range bs {
			if b.Type != "text" || b.Text == nil {
				return "", false
			}
			sb.WriteString(*b.Text)
		}
		return sb.String(), true
	}
	return "", false
}

// mapTools fills tools and tool_choice.
func (m *Mapped) mapTools(r *Request) *openai.Error {
	c := &m.Chat
	m.ToolNames = map[string]bool{}
	for i, raw := range r.Tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return openai.BadRequest("tools", "tools.%d: must be an object", i)
		}
		if t.Type != "" && t.Type != "custom" {
			m.Dropped = append(m.Dropped, t.Type)
			continue
		}
		if t.Name == "" {
			return openai.BadRequest("tools", "tools.%d.name: Field required", i)
		}
		if isNull(t.InputSchema) {
			return openai.BadRequest("tools", "tools.%d.input_schema: Field required", i)
		}
		if m.ToolNames[t.Name] {
			return openai.BadRequest("tools", "tools: tool names must be unique (%q)", t.Name)
		}
		m.ToolNames[t.Name] = true
		fn := map[string]any{"name": t.Name, "parameters": t.InputSchema}
		if t.Description != nil {
			fn["description"] = *t.Description
		}
		out, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
		c.Tools = append(c.Tools, out)
	}
	if isNull(r.ToolChoice) {
		return nil
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(r.ToolChoice, &tc); err != nil {
		return openai.BadRequest("tool_choice", "tool_choice: must be an object with a type")
	}
	if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
		f := false
		c.ParallelToolCalls = &f
	}
	switch tc.Type {
	case "auto":
		// Unset: the server's auto tool choice setting decides, as chat
		// does without tool_choice.
	case "none":
		if len(c.Tools) > 0 {
			c.ToolChoice = json.RawMessage(`"none"`)
		}
	case "any":
		if len(c.Tools) == 0 {
			return openai.BadRequest("tool_choice", "tool_choice: any needs tools")
		}
		c.ToolChoice = json.RawMessage(`"required"`)
	case "tool":
		if !m.ToolNames[tc.Name] {
			return openai.BadRequest("tool_choice", "tool_choice: tool %q is not in tools", tc.Name)
		}
		c.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
	default:
		return openai.BadRequest("tool_choice", "tool_choice.type: must be auto, any, tool or none, got %q", tc.Type)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
