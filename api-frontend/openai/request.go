package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// StreamOptions is the stream_options object.
type StreamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

// commonRequest holds the fields completions and chat share.
type commonRequest struct {
	Model                  string             `json:"model"`
	MaxTokens              *int64             `json:"max_tokens"`
	Temperature            *float64           `json:"temperature"`
	TopP                   *float64           `json:"top_p"`
	TopK                   *int64             `json:"top_k"`
	MinP                   *float64           `json:"min_p"`
	N                      *int64             `json:"n"`
	Seed                   *int64             `json:"seed"`
	Stop                   json.RawMessage    `json:"stop"`
	StopTokenIDs           []int64            `json:"stop_token_ids"`
	IncludeStopStrInOutput bool               `json:"include_stop_str_in_output"`
	IgnoreEOS              bool               `json:"ignore_eos"`
	MinTokens              *int64             `json:"min_tokens"`
	PresencePenalty        *float64           `json:"presence_penalty"`
	FrequencyPenalty       *float64           `json:"frequency_penalty"`
	RepetitionPenalty      *float64           `json:"repetition_penalty"`
	LogitBias              map[string]float64 `json:"logit_bias"`
	Echo                   bool               `json:"echo"`
	Stream                 bool               `json:"stream"`
	StreamOptions          *StreamOptions     `json:"stream_options"`
	SkipSpecialTokens      *bool              `json:"skip_special_tokens"`
	User                   string             `json:"user"`
	StreamInterval         *int64             `json:"stream_interval"`
	Priority               *int64             `json:"priority"`
	RequestID              string             `json:"request_id"`
	structuredFields
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	commonRequest
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int64          `json:"logprobs"`
	Suffix   *string         `json:"suffix"`
	BestOf   *int64          `json:"best_of"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	commonRequest
	Messages             []json.RawMessage `json:"messages"`
	MaxCompletionTokens  *int64            `json:"max_completion_tokens"`
	Logprobs             *bool             `json:"logprobs"`
	TopLogprobs          *int64            `json:"top_logprobs"`
	Tools                []json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls    *bool             `json:"parallel_tool_calls"`
	ChatTemplateKwargs   map[string]any    `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool             `json:"add_generation_prompt"`
	ContinueFinalMessage bool              `json:"continue_final_message"`
	IncludeReasoning     *bool             `json:"include_reasoning"`
	ChatTemplate         *string           `json:"chat_template"`
	// ReasoningEffort is passed to the chat template as reasoning_effort
	// (gpt-oss renders it in its system message) unless
	// chat_template_kwargs sets it.
	ReasoningEffort *string `json:"reasoning_effort"`
}

// TokenizeRequest is the body of POST /tokenize: either prompt or messages.
type TokenizeRequest struct {
	Model               string            `json:"model"`
	Prompt              *string           `json:"prompt"`
	Messages            []json.RawMessage `json:"messages"`
	AddSpecialTokens    *bool             `json:"add_special_tokens"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ReturnTokenStrs     bool              `json:"return_token_strs"`
	Tools               []json.RawMessage `json:"tools"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// DetokenizeRequest is the body of POST /detokenize.
type DetokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

// Decode parses a JSON request body into v (a pointer to a zero value of
// one of the request types). Wrong types name the field; unknown fields
// are ignored.
func Decode(body []byte, v any) *Error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return BadRequest("", "request body is empty; expected a JSON object")
	}
	if body[0] != '{' {
		return BadRequest("", "request body must be a JSON object")
	}
	// The common bodies of the generation routes skip json.Unmarshal's
	// reflection (fastdecode.go); anything else, errors included, is
	// json.Unmarshal's. v is a zero value here (every caller's).
	switch r := v.(type) {
	case *CompletionRequest:
		var fast CompletionRequest
		if fast.decodeFast(body) {
			*r = fast
			return nil
		}
	case *ChatRequest:
		var fast ChatRequest
		if fast.decodeFast(body) {
			*r = fast
			return nil
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "commonRequest.")
			field = strings.TrimPrefix(field, "structuredFields.")
			if i := strings.IndexByte(field, '.'); i >= 0 && !strings.HasPrefix(field, "stream_options") {
				field = field[:i]
			}
			return BadRequest(field, "invalid type for %s: expected %s, got JSON %s", fieldOr(field, "body"), goTypeName(te.Type.String()), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return BadRequest("", "invalid JSON at offset %d: %v", se.Offset, se)
		}
		return BadRequest("", "invalid request body: %v", err)
	}
	return nil
}

func fieldOr(f, alt string) string {
	if f == "" {
		return alt
	}
	return f
}

// goTypeName turns a Go type into the JSON kind a client understands.
func goTypeName(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "integer"
	case strings.HasPrefix(t, "float"):
		return "number"
	case t == "bool":
		return "boolean"
	case t == "string":
		return "string"
	case strings.HasPrefix(t, "[]"):
		return "array"
	case strings.HasPrefix(t, "map"), strings.HasPrefix(t, "openai."):
		return "object"
	}
	return t
}
