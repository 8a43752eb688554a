// Package responses maps OpenAI Responses API requests (POST /v1/responses)
// onto the chat completions request the rest of the frontend already serves,
// and renders generation results as Responses objects and typed SSE events.
//
// The mapping: `instructions` becomes a leading system message; `input` (a
// string, or a list of message / function_call / function_call_output /
// reasoning items) becomes chat messages (reasoning goes onto the next
// assistant message as reasoning_content, function calls onto an assistant
// message's tool_calls, outputs become tool messages); function tools become
// chat tools, `namespace` tools are flattened (a name that collides gets the
// namespace as a prefix), hosted tools (web_search, file_search, …) are left
// out and reported; `text.format` becomes response_format,
// `reasoning.effort` the chat template's reasoning_effort, and
// `max_output_tokens` max_completion_tokens. Fields shared with chat
// (temperature, top_p, seed, stop, top_k, …) keep their chat meaning; fields
// that mean nothing here (prompt_cache_key, client_metadata, include,
// service_tier, …) are accepted and ignored.
package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/api-frontend/openai"
)

// Request is the body of POST /v1/responses. The embedded chat request
// carries the sampling extras the two APIs share by name; the fields below
// shadow chat's where the Responses API defines them differently.
type Request struct {
	openai.ChatRequest
	Input              json.RawMessage   `json:"input"`
	Instructions       json.RawMessage   `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Text               *TextConfig       `json:"text"`
	Reasoning          *ReasoningConfig  `json:"reasoning"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Store              *bool             `json:"store"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Include            []string          `json:"include"`
	Metadata           map[string]string `json:"metadata"`
	Truncation         *string           `json:"truncation"`
	Background         *bool             `json:"background"`
	// Accepted and ignored: they steer OpenAI's own caching, billing and
	// routing.
	PromptCacheKey json.RawMessage `json:"prompt_cache_key"`
	ClientMetadata json.RawMessage `json:"client_metadata"`
	ServiceTier    json.RawMessage `json:"service_tier"`
	// N is not a Responses field; it shadows chat's so a body cannot ask for
	// several choices.
	N json.RawMessage `json:"n"`
	// Messages shadows chat's: the Responses API takes input, not messages.
	Messages json.RawMessage `json:"messages"`
}

// TextConfig is the request's text object.
type TextConfig struct {
	Format    json.RawMessage `json:"format"`
	Verbosity json.RawMessage `json:"verbosity"`
}

// ReasoningConfig is the request's reasoning object.
type ReasoningConfig struct {
	Effort  *string         `json:"effort"`
	Summary json.RawMessage `json:"summary"`
}

// Mapped is a Responses request translated for the chat path.
type Mapped struct {
	// Chat is the chat completions request to validate and run.
	Chat openai.ChatRequest
	// Store reports whether the response is to be kept.
	Store bool
	// IncludeEncrypted: the client asked for reasoning.encrypted_content.
	IncludeEncrypted bool
	// Input is the request's own input as a list of items (a string input
	// becomes one user message item), for the stored history.
	Input []json.RawMessage
	// Dropped names the hosted tools left out of what the model sees.
	Dropped []string
	// Truncation is "disabled" (the default) or "auto".
	Truncation string
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
		return nil, decodeError(err)
	}
	return &r, nil
}

// decodeError names the field a JSON type error is about.
func decodeError(err error) *openai.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		for _, p := range []string{"ChatRequest.", "commonRequest.", "structuredFields."} {
			field = strings.ReplaceAll(field, p, "")
		}
		if field == "" {
			field = "body"
		}
		return openai.BadRequest(field, "invalid type for %s: got JSON %s", field, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return openai.BadRequest("", "invalid JSON at offset %d: %v", se.Offset, se)
	}
	return openai.BadRequest("", "invalid request body: %v", err)
}

// Opener reads back encrypted_content this server produced; nil when the
// deployment has no key.
type Opener interface {
	Open(sealed string) (string, error)
}

// Map translates r into a chat request. history is the stored conversation
// of previous_response_id (nil when none); open reads encrypted reasoning.
func Map(r *Request, history []json.RawMessage, open Opener) (*Mapped, *openai.Error) {
	m := &Mapped{Store: r.Store == nil || *r.Store, Truncation: "disabled"}
	c := &m.Chat
	*c = r.ChatRequest
	c.Messages, c.Tools, c.ToolChoice = nil, nil, nil
	if !isNull(r.N) && string(bytes.TrimSpace(r.N)) != "1" {
		return nil, openai.BadRequest("n", "the Responses API returns one output; n is not supported")
	}
	c.N = nil
	if r.Truncation != nil {
		switch *r.Truncation {
		case "disabled", "auto":
			m.Truncation = *r.Truncation
		default:
			return nil, openai.BadRequest("truncation", "truncation must be disabled or auto, got %q", *r.Truncation)
		}
	}
	if r.Background != nil && *r.Background {
		return nil, openai.BadRequest("background", "background responses are not supported; use stream instead")
	}
	for _, inc := range r.Include {
		if inc == "reasoning.encrypted_content" {
			m.IncludeEncrypted = true
		}
	}
	if r.MaxOutputTokens != nil {
		if *r.MaxOutputTokens < 1 {
			return nil, openai.BadRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *r.MaxOutputTokens)
		}
		v := *r.MaxOutputTokens
		c.MaxCompletionTokens = &v
	}
	c.MaxTokens = nil
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		kw := map[string]any{}
		for k, v := range r.ChatTemplateKwargs {
			kw[k] = v
		}
		kw["reasoning_effort"] = *r.Reasoning.Effort
		c.ChatTemplateKwargs = kw
	}
	if e := mapFormat(r, c); e != nil {
		return nil, e
	}

	// Messages: instructions, then the previous conversation, then input.
	var b builder
	b.open = open
	if !isNull(r.Instructions) {
		s, ok := stringOrText(r.Instructions)
		if !ok {
			return nil, openai.BadRequest("instructions", "instructions must be a string")
		}
		if s != "" {
			b.add(openai.Message{Role: "system", Content: s})
		}
	}
	input, e := inputItems(r.Input)
	if e != nil {
		return nil, e
	}
	m.Input = input
	for i, it := range history {
		if e := b.item(it, fmt.Sprintf("previous_response_id (item %d)", i)); e != nil {
			return nil, e
		}
	}
	for i, it := range input {
		if e := b.item(it, fmt.Sprintf("input[%d]", i)); e != nil {
			return nil, e
		}
	}
	b.flush()
	if len(b.out) == 0 {
		return nil, openai.BadRequest("input", "input must not be empty")
	}
	for _, mm := range b.out {
		raw, err := json.Marshal(mm)
		if err != nil {
			return nil, openai.BadRequest("input", "encode message: %v", err)
		}
		c.Messages = append(c.Messages, raw)
	}

	tools, names, dropped, e := mapTools(r.Tools)
	if e != nil {
		return nil, e
	}
	m.Dropped = dropped
	c.Tools = tools
	tc, e := mapToolChoice(r.ToolChoice, names)
	if e != nil {
		return nil, e
	}
	if len(tools) > 0 {
		c.ToolChoice = tc
	}
	return m, nil
}

// mapFormat turns text.format into response_format.
func mapFormat(r *Request, c *openai.ChatRequest) *openai.Error {
	if r.Text == nil || isNull(r.Text.Format) {
		return nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(r.Text.Format, &f); err != nil {
		return openai.BadRequest("text.format", "text.format must be an object with a type")
	}
	switch f.Type {
	case "text":
	case "json_object":
		c.ResponseFormat = &openai.ResponseFormat{Type: "json_object"}
	case "json_schema":
		if isNull(f.Schema) {
			return openai.BadRequest("text.format.schema", "text.format of type json_schema needs a schema")
		}
		c.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", JSONSchema: &openai.JSONSchemaSpec{
			Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
	default:
		return openai.BadRequest("text.format.type", "text.format.type must be text, json_object or json_schema, got %q", f.Type)
	}
	return nil
}

// inputItems returns the input as a list of items.
func inputItems(raw json.RawMessage) ([]json.RawMessage, *openai.Error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, openai.BadRequest("input", "input must be a string or a list of items")
		}
		it, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{it}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, openai.BadRequest("input", "input must be a string or a list of items")
		}
		return items, nil
	}
	return nil, openai.BadRequest("input", "input must be a string or a list of items")
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// stringOrText reads a string, or a list of text parts joined.
func stringOrText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return "", true
	}
	switch raw[0] {
	case '"':
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	case '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) != nil {
			return "", false
		}
		var sb strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text":
				if p.Text == nil {
					return "", false
				}
				sb.WriteString(*p.Text)
			default:
				return "", false
			}
		}
		return sb.String(), true
	}
	return "", false
}
