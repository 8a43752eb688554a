package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// Limits are the facts about the served model that validation needs.
type Limits struct {
	VocabSize   int // token ids must be below it (0: unchecked)
	MaxModelLen int // context length (0: unchecked)
	MaxLogprobs int // most top logprobs per token (default 20)
	MaxN        int // most choices per request (default 128)
	// Constraints, when set, memoizes compiled structured-output
	// constraints across requests.
	Constraints *ConstraintCache
	// JSONWhitespace is the whitespace JSON constraints allow between
	// tokens unless the request asks for compact JSON.
	JSONWhitespace constraint.Whitespace
	// RequestLimits bound what one request may ask for.
	RequestLimits
}

// RequestLimits bound the cost of one request's fields, so that no single
// request can stall, starve or bloat the server (issue 21). Zero means the
// default; each is a frontend flag of the same name (docs/RELIABILITY.md).
type RequestLimits struct {
	// MaxStopStrings is the most stop strings per request
	// (--max-stop-strings, default DefaultMaxStopStrings).
	MaxStopStrings int
	// MaxStopStrBytes is the most bytes of all stop strings together
	// (--max-stop-str-bytes, default DefaultMaxStopStrBytes).
	MaxStopStrBytes int
	// MaxLogitBias is the most logit_bias entries (--max-logit-bias,
	// default DefaultMaxLogitBias, OpenAI's limit).
	MaxLogitBias int
	// MaxSeqsPerRequest is the most sequences (prompts × n) one request
	// may start (--max-seqs-per-request, default DefaultMaxSeqsPerRequest).
	MaxSeqsPerRequest int
	// MaxTokenizeTokens is the most tokens /tokenize answers
	// (--max-tokenize-tokens, default DefaultMaxTokenizeTokens).
	MaxTokenizeTokens int
	// MaxGrammarBytes is the most estimated memory of one compiled
	// structured-output grammar (--max-grammar-bytes, default
	// constraint.MaxGrammarBytes); a larger one is a 400.
	MaxGrammarBytes int64
}

// Defaults of RequestLimits.
const (
	DefaultMaxStopStrings    = 64
	DefaultMaxStopStrBytes   = 16 << 10
	DefaultMaxLogitBias      = 300
	DefaultMaxSeqsPerRequest = 256
	DefaultMaxTokenizeTokens = 1 << 18
)

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// grammarBytes is MaxGrammarBytes, or its default when unset.
func (l RequestLimits) grammarBytes() int64 {
	if l.MaxGrammarBytes <= 0 {
		return constraint.MaxGrammarBytes
	}
	return l.MaxGrammarBytes
}

// WithDefaults returns l with every unset limit at its default.
func (l RequestLimits) WithDefaults() RequestLimits {
	l.MaxStopStrings = orDefault(l.MaxStopStrings, DefaultMaxStopStrings)
	l.MaxStopStrBytes = orDefault(l.MaxStopStrBytes, DefaultMaxStopStrBytes)
	l.MaxLogitBias = orDefault(l.MaxLogitBias, DefaultMaxLogitBias)
	l.MaxSeqsPerRequest = orDefault(l.MaxSeqsPerRequest, DefaultMaxSeqsPerRequest)
	l.MaxTokenizeTokens = orDefault(l.MaxTokenizeTokens, DefaultMaxTokenizeTokens)
	l.MaxGrammarBytes = l.grammarBytes()
	return l
}

func (l Limits) maxLogprobs() int64 {
	if l.MaxLogprobs <= 0 {
		return 20
	}
	return int64(l.MaxLogprobs)
}

func (l Limits) maxN() int64 {
	if l.MaxN <= 0 {
		return 128
	}
	return int64(l.MaxN)
}

// Options are a request's validated generation options.
type Options struct {
	Params          ipc.SamplingParams // MaxTokens 0 when the request gave none
	N               int
	Stops           []string
	IncludeStop     bool
	SkipSpecial     bool
	Logprobs        int // top logprobs per token; -1: none
	Echo            bool
	Stream          bool
	IncludeUsage    bool
	ContinuousUsage bool
	StreamInterval  int // 0: the server's default
	Priority        int32
	RequestID       string
	// ConstraintParam names the request field Params.Constraint came from
	// ("response_format", "guided_json", "tool_choice", …); "" when none.
	ConstraintParam string
}

// Prompt is one prompt of a completions request: text, or token ids.
type Prompt struct {
	Text     string
	IDs      []int32
	FromText bool // Text is the prompt (IDs are filled by tokenization)
}

// Completion is a validated completions request.
type Completion struct {
	Options
	Prompts []Prompt
}

// Tool is a function the model may call.
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolChoice is the request's tool_choice: Mode none, auto, required or
// named (then Name is the function).
type ToolChoice struct {
	Mode string
	Name string
}

// ToolConfig is the server's tool calling setup.
type ToolConfig struct {
	AutoEnabled bool   // --enable-auto-tool-choice
	Parser      string // --tool-call-parser
}

// Chat is a validated chat completions request.
type Chat struct {
	Options
	Messages   []json.RawMessage
	Tools      []json.RawMessage
	ToolDefs   []Tool
	ToolChoice ToolChoice
	// ToolOutput says how to read the output when tool_choice is required
	// or named (Params.Constraint then holds the tool-call grammar).
	ToolOutput           ToolOutput
	Kwargs               map[string]any
	AddGenerationPrompt  bool
	ContinueFinalMessage bool
	IncludeReasoning     bool
	LastRole             string // role of the last message
	LastContent          string // text content of the last message (for echo)
}

func (r *commonRequest) validate(lim Limits, o *Options) *Error {
	p := &o.Params
	p.Logprobs = -1
	o.Logprobs = -1
	if r.Temperature != nil {
		if *r.Temperature < 0 || *r.Temperature > 100 {
			return BadRequest("temperature", "temperature must be in [0, 100], got %v", *r.Temperature)
		}
		p.Temperature = float32(*r.Temperature)
	} else {
		p.Temperature = 1
	}
	if r.TopP != nil {
		if *r.TopP <= 0 || *r.TopP > 1 {
			return BadRequest("top_p", "top_p must be in (0, 1], got %v", *r.TopP)
		}
		p.TopP = float32(*r.TopP)
	}
	if r.TopK != nil {
		if *r.TopK < -1 || *r.TopK > math.MaxInt32 {
			return BadRequest("top_k", "top_k must be -1 (disable), 0 or at least 1, got %d", *r.TopK)
		}
		if *r.TopK > 0 {
			p.TopK = int32(*r.TopK)
		}
	}
	if r.MinP != nil {
		if *r.MinP < 0 || *r.MinP > 1 {
			return BadRequest("min_p", "min_p must be in [0, 1], got %v", *r.MinP)
		}
		p.MinP = float32(*r.MinP)
	}
	rl := lim.RequestLimits.WithDefaults()
	o.N = 1
	if r.N != nil {
		if *r.N < 1 || *r.N > lim.maxN() || *r.N > int64(rl.MaxSeqsPerRequest) {
			if int64(rl.MaxSeqsPerRequest) < lim.maxN() {
				return BadRequest("n", "n must be between 1 and %d (--max-seqs-per-request), got %d", rl.MaxSeqsPerRequest, *r.N)
			}
			return BadRequest("n", "n must be between 1 and %d, got %d", lim.maxN(), *r.N)
		}
		o.N = int(*r.N)
	}
	if r.Seed != nil {
		p.HasSeed, p.Seed = true, *r.Seed
	}
	stops, err := parseStop(r.Stop, rl)
	if err != nil {
		return err
	}
	o.Stops = stops
	for i, id := range r.StopTokenIDs {
		if id < 0 || (lim.VocabSize > 0 && id >= int64(lim.VocabSize)) {
			return BadRequest("stop_token_ids", "stop_token_ids[%d] = %d is not a token id (vocabulary size %d)", i, id, lim.VocabSize)
		}
		p.StopTokenIDs = append(p.StopTokenIDs, int32(id))
	}
	o.IncludeStop = r.IncludeStopStrInOutput
	p.IgnoreEOS = r.IgnoreEOS
	if r.MinTokens != nil {
		if *r.MinTokens < 0 || *r.MinTokens > math.MaxInt32 {
			return BadRequest("min_tokens", "min_tokens must be >= 0, got %d", *r.MinTokens)
		}
		p.MinTokens = int32(*r.MinTokens)
	}
	if r.PresencePenalty != nil {
		if *r.PresencePenalty < -2 || *r.PresencePenalty > 2 {
			return BadRequest("presence_penalty", "presence_penalty must be in [-2, 2], got %v", *r.PresencePenalty)
		}
		p.PresencePenalty = float32(*r.PresencePenalty)
	}
	if r.FrequencyPenalty != nil {
		if *r.FrequencyPenalty < -2 || *r.FrequencyPenalty > 2 {
			return BadRequest("frequency_penalty", "frequency_penalty must be in [-2, 2], got %v", *r.FrequencyPenalty)
		}
		p.FrequencyPenalty = float32(*r.FrequencyPenalty)
	}
	if r.RepetitionPenalty != nil {
		if *r.RepetitionPenalty <= 0 || *r.RepetitionPenalty > 100 {
			return BadRequest("repetition_penalty", "repetition_penalty must be in (0, 100], got %v", *r.RepetitionPenalty)
		}
		p.RepetitionPenalty = float32(*r.RepetitionPenalty)
	}
	if len(r.LogitBias) > rl.MaxLogitBias {
		return BadRequest("logit_bias", "logit_bias has %d entries, more than the limit of %d (--max-logit-bias)", len(r.LogitBias), rl.MaxLogitBias)
	}
	for k, v := range r.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || (lim.VocabSize > 0 && id >= int64(lim.VocabSize)) {
			return BadRequest("logit_bias", "logit_bias key %q is not a token id (vocabulary size %d)", truncate(k, 32), lim.VocabSize)
		}
		if strconv.FormatInt(id, 10) != k {
			// "007" and "+7" would be a second entry for token 7.
			return BadRequest("logit_bias", "logit_bias key %q is not a canonical token id (write %d)", truncate(k, 32), id)
		}
		if v < -100 || v > 100 {
			return BadRequest("logit_bias", "logit_bias value for token %s must be in [-100, 100], got %v", k, v)
		}
		p.LogitBias = append(p.LogitBias, ipc.LogitBias{Token: int32(id), Bias: float32(v)})
	}
	sortLogitBias(p.LogitBias)
	o.Echo = r.Echo
	o.Stream = r.Stream
	if r.StreamOptions != nil {
		if !r.Stream {
			return BadRequest("stream_options", "stream_options can only be set when stream is true")
		}
		o.IncludeUsage = r.StreamOptions.IncludeUsage != nil && *r.StreamOptions.IncludeUsage
		o.ContinuousUsage = o.IncludeUsage && r.StreamOptions.ContinuousUsageStats != nil && *r.StreamOptions.ContinuousUsageStats
	}
	o.SkipSpecial = r.SkipSpecialTokens == nil || *r.SkipSpecialTokens
	if r.StreamInterval != nil {
		if *r.StreamInterval < 1 || *r.StreamInterval > 1<<20 {
			return BadRequest("stream_interval", "stream_interval must be >= 1, got %d", *r.StreamInterval)
		}
		o.StreamInterval = int(*r.StreamInterval)
	}
	if r.Priority != nil {
		if *r.Priority < math.MinInt32 || *r.Priority > math.MaxInt32 {
			return BadRequest("priority", "priority out of range: %d", *r.Priority)
		}
		o.Priority = int32(*r.Priority)
	}
	if len(r.RequestID) > 256 {
		return BadRequest("request_id", "request_id is longer than 256 bytes")
	}
	o.RequestID = r.RequestID
	return nil
}

// setMaxTokens validates a max_tokens value (param names the field).
func setMaxTokens(o *Options, v *int64, param string) *Error {
	if v == nil {
		return nil
	}
	if *v < 1 || *v > math.MaxInt32 {
		return BadRequest(param, "%s must be at least 1, got %d", param, *v)
	}
	o.Params.MaxTokens = int32(*v)
	if o.Params.MinTokens > o.Params.MaxTokens {
		return BadRequest("min_tokens", "min_tokens (%d) must be <= %s (%d)", o.Params.MinTokens, param, *v)
	}
	return nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func parseStop(raw json.RawMessage, rl RequestLimits) ([]string, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, BadRequest("stop", "stop must be a string or a list of strings")
		}
		if one == "" {
			return nil, BadRequest("stop", "stop strings must not be empty")
		}
		if len(one) > rl.MaxStopStrBytes {
			return nil, BadRequest("stop", "stop strings total %d bytes, more than the limit of %d (--max-stop-str-bytes)", len(one), rl.MaxStopStrBytes)
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, BadRequest("stop", "stop must be a string or a list of strings")
	}
	if len(list) > rl.MaxStopStrings {
		return nil, BadRequest("stop", "stop has %d strings, more than the limit of %d (--max-stop-strings)", len(list), rl.MaxStopStrings)
	}
	total := 0
	for _, s := range list {
		if s == "" {
			return nil, BadRequest("stop", "stop strings must not be empty")
		}
		total += len(s)
	}
	if total > rl.MaxStopStrBytes {
		return nil, BadRequest("stop", "stop strings total %d bytes, more than the limit of %d (--max-stop-str-bytes)", total, rl.MaxStopStrBytes)
	}
	return list, nil
}

// sortLogitBias sorts by token id in O(n log n) (keys are canonical, so
// ids are distinct).
func sortLogitBias(b []ipc.LogitBias) {
	slices.SortFunc(b, func(x, y ipc.LogitBias) int { return cmp.Compare(x.Token, y.Token) })
}

// Validate checks a completions request against lim.
func (r *CompletionRequest) Validate(lim Limits) (*Completion, *Error) {
	c := &Completion{}
	if err := r.validate(lim, &c.Options); err != nil {
		return nil, err
	}
	c.Params.MaxTokens = 16 // the OpenAI default for completions
	if err := setMaxTokens(&c.Options, r.MaxTokens, "max_tokens"); err != nil {
		return nil, err
	}
	if r.Suffix != nil && *r.Suffix != "" {
		return nil, BadRequest("suffix", "suffix is not supported")
	}
	if r.BestOf != nil && *r.BestOf != int64(c.N) && *r.BestOf != 1 {
		return nil, BadRequest("best_of", "best_of is not supported")
	}
	if r.Logprobs != nil {
		if *r.Logprobs < 0 || *r.Logprobs > lim.maxLogprobs() {
			return nil, BadRequest("logprobs", "logprobs must be between 0 and %d, got %d", lim.maxLogprobs(), *r.Logprobs)
		}
		c.Logprobs = int(*r.Logprobs)
		c.Params.Logprobs = int32(*r.Logprobs)
	}
	prompts, err := parsePrompt(r.Prompt, lim)
	if err != nil {
		return nil, err
	}
	c.Prompts = prompts
	if seqs, lim := len(prompts)*c.N, lim.RequestLimits.WithDefaults().MaxSeqsPerRequest; seqs > lim {
		return nil, BadRequest("n", "this request asks for %d prompts × n %d = %d sequences, more than the limit of %d (--max-seqs-per-request)", len(prompts), c.N, seqs, lim)
	}
	if e := r.compileStructured(lim, &c.Options); e != nil {
		return nil, e
	}
	return c, nil
}

// plainString returns the JSON string literal raw as a Go string without
// the decoder when it needs no unescaping: no backslash, no control
// character, valid UTF-8 (what json.Unmarshal would return unchanged, most
// prompts); ok is false otherwise, and the caller decodes it.
func plainString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// parsePrompt accepts a string, a list of strings, a list of token ids, or a
// list of token-id lists.
func parsePrompt(raw json.RawMessage, lim Limits) ([]Prompt, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, BadRequest("prompt", "prompt is required")
	}
	switch raw[0] {
	case '"':
		s, ok := plainString(raw)
		if !ok {
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, BadRequest("prompt", "prompt is not a valid string")
			}
		}
		// An empty string is a valid prompt when the tokenizer adds BOS
		// (unconditional generation); the handler refuses one that
		// encodes to no tokens.
		return []Prompt{{Text: s, FromText: true}}, nil
	case '[':
	default:
		return nil, BadRequest("prompt", "prompt must be a string, a list of strings, a list of token ids or a list of token-id lists")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, BadRequest("prompt", "prompt is not a valid list")
	}
	if len(items) == 0 {
		return nil, BadRequest("prompt", "prompt must not be an empty list")
	}
	first := bytes.TrimSpace(items[0])
	if len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
		ids, err := parseIDs(raw, lim)
		if err != nil {
			return nil, err
		}
		return []Prompt{{IDs: ids}}, nil
	}
	out := make([]Prompt, 0, len(items))
	for _, it := range items {
		it = bytes.TrimSpace(it)
		if len(it) == 0 {
			return nil, BadRequest("prompt", "prompt list element is empty")
		}
		switch it[0] {
		case '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, BadRequest("prompt", "prompt list elements must be strings")
			}
			out = append(out, Prompt{Text: s, FromText: true})
		case '[':
			ids, err := parseIDs(it, lim)
			if err != nil {
				return nil, err
			}
			out = append(out, Prompt{IDs: ids})
		default:
			return nil, BadRequest("prompt", "prompt list elements must all be strings or all be token-id lists")
		}
	}
	return out, nil
}

func parseIDs(raw json.RawMessage, lim Limits) ([]int32, *Error) {
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, BadRequest("prompt", "token-id prompt must be a list of integers")
	}
	if len(ids) == 0 {
		return nil, BadRequest("prompt", "token-id prompt must not be empty")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || (lim.VocabSize > 0 && id >= int64(lim.VocabSize)) {
			return nil, BadRequest("prompt", "token id %d in prompt is out of vocabulary (size %d)", id, lim.VocabSize)
		}
		out[i] = int32(id)
	}
	return out, nil
}

var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

type messageHead struct {
	Role      *string         `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// Validate checks a chat request against lim and the server's tool setup.
func (r *ChatRequest) Validate(lim Limits, tc ToolConfig) (*Chat, *Error) {
	c := &Chat{}
	if err := r.validate(lim, &c.Options); err != nil {
		return nil, err
	}
	if err := setMaxTokens(&c.Options, r.MaxTokens, "max_tokens"); err != nil {
		return nil, err
	}
	if err := setMaxTokens(&c.Options, r.MaxCompletionTokens, "max_completion_tokens"); err != nil {
		return nil, err
	}
	if r.Logprobs != nil && *r.Logprobs {
		c.Logprobs = 0
		c.Params.Logprobs = 0
	}
	if r.TopLogprobs != nil {
		if *r.TopLogprobs < 0 || *r.TopLogprobs > lim.maxLogprobs() {
			return nil, BadRequest("top_logprobs", "top_logprobs must be between 0 and %d, got %d", lim.maxLogprobs(), *r.TopLogprobs)
		}
		if *r.TopLogprobs > 0 && c.Logprobs < 0 {
			return nil, BadRequest("top_logprobs", "top_logprobs requires logprobs to be true")
		}
		if c.Logprobs >= 0 {
			c.Logprobs = int(*r.TopLogprobs)
			c.Params.Logprobs = int32(*r.TopLogprobs)
		}
	}
	if len(r.Messages) == 0 {
		return nil, BadRequest("messages", "messages must be a non-empty list")
	}
	for i, m := range r.Messages {
		var h messageHead
		if err := json.Unmarshal(m, &h); err != nil {
			return nil, BadRequest("messages", "messages[%d] must be an object with a role and content", i)
		}
		if h.Role == nil || !validRoles[*h.Role] {
			return nil, BadRequest("messages", "messages[%d].role must be one of system, developer, user, assistant, tool", i)
		}
		text, ok := contentText(h.Content)
		if !ok {
			return nil, BadRequest("messages", "messages[%d].content must be a string, a list of text parts, or null", i)
		}
		if i == len(r.Messages)-1 {
			c.LastRole, c.LastContent = *h.Role, text
		}
	}
	c.Messages = r.Messages
	c.AddGenerationPrompt = r.AddGenerationPrompt == nil || *r.AddGenerationPrompt
	c.ContinueFinalMessage = r.ContinueFinalMessage
	if c.AddGenerationPrompt && c.ContinueFinalMessage {
		return nil, BadRequest("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true")
	}
	if c.ContinueFinalMessage && c.LastRole != "assistant" {
		return nil, BadRequest("continue_final_message", "continue_final_message needs a final assistant message")
	}
	c.Kwargs = r.ChatTemplateKwargs
	if r.ReasoningEffort != nil {
		switch *r.ReasoningEffort {
		case "minimal", "low", "medium", "high":
		default:
			return nil, BadRequest("reasoning_effort", "reasoning_effort must be one of minimal, low, medium, high (got %q)", *r.ReasoningEffort)
		}
		if _, ok := c.Kwargs["reasoning_effort"]; !ok {
			kw := make(map[string]any, len(c.Kwargs)+1)
			for k, v := range c.Kwargs {
				kw[k] = v
			}
			kw["reasoning_effort"] = *r.ReasoningEffort
			c.Kwargs = kw
		}
	}
	c.IncludeReasoning = r.IncludeReasoning == nil || *r.IncludeReasoning
	if r.ChatTemplate != nil {
		return nil, BadRequest("chat_template", "per-request chat_template is not allowed; start the server with --chat-template")
	}
	if err := c.validateTools(r, tc); err != nil {
		return nil, err
	}
	var extra []string
	if c.ToolChoice.Mode == "required" || c.ToolChoice.Mode == "named" {
		extra = append(extra, "tool_choice")
	}
	if e := r.compileStructured(lim, &c.Options, extra...); e != nil {
		return nil, e
	}
	if extra != nil {
		multiple := r.ParallelToolCalls == nil || *r.ParallelToolCalls
		key, _ := json.Marshal(struct {
			P string
			C ToolChoice
			M bool
			T []json.RawMessage
		}{tc.Parser, c.ToolChoice, multiple, r.Tools})
		ct, out, err := lim.Constraints.get("tools\x00"+string(key), func() (ipc.Constraint, ToolOutput, error) {
			ct, out, err := ToolConstraint(tc.Parser, c.ToolDefs, c.ToolChoice, multiple)
			if err == nil {
				err = constraint.CheckBytes(ct, lim.grammarBytes())
			}
			return ct, out, err
		})
		if err != nil {
			return nil, constraintError("tools", err)
		}
		c.Params.Constraint, c.ConstraintParam, c.ToolOutput = &ct, "tool_choice", out
	}
	return c, nil
}

// contentText returns the text of a message content (string, list of text
// parts, or null).
func contentText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case '[':
		var parts []contentPart
		if json.Unmarshal(raw, &parts) != nil {
			return "", false
		}
		var b []byte
		for _, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return "", false
			}
			b = append(b, *p.Text...)
		}
		return string(b), true
	}
	return "", false
}

type toolHead struct {
	Type     string `json:"type"`
	Function *struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func (c *Chat) validateTools(r *ChatRequest, tc ToolConfig) *Error {
	if r.Tools != nil && len(r.Tools) == 0 {
		return BadRequest("tools", "tools must not be an empty list")
	}
	for i, t := range r.Tools {
		var h toolHead
		if err := json.Unmarshal(t, &h); err != nil || h.Type != "function" || h.Function == nil || h.Function.Name == "" {
			return BadRequest("tools", "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": …}}", i)
		}
		c.ToolDefs = append(c.ToolDefs, Tool{Name: h.Function.Name, Parameters: h.Function.Parameters})
	}
	c.Tools = r.Tools
	raw := bytes.TrimSpace(r.ToolChoice)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		if len(c.ToolDefs) > 0 {
			c.ToolChoice.Mode = "auto"
			if !tc.AutoEnabled {
				// vLLM lets tools through with no parsing when auto is
				// not enabled; the model may still describe calls in text.
				c.ToolChoice.Mode = "none"
			}
		} else {
			c.ToolChoice.Mode = "none"
		}
		return nil
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "none":
			c.ToolChoice.Mode = "none"
			return nil
		case "auto", "required":
		default:
			return BadRequest("tool_choice", "tool_choice must be none, auto, required or a named function, got %q", s)
		}
		if len(c.ToolDefs) == 0 {
			return BadRequest("tool_choice", "tool_choice %q needs tools", s)
		}
		if s == "auto" && (!tc.AutoEnabled || tc.Parser == "") {
			return BadRequest("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set")
		}
		c.ToolChoice.Mode = s
		return nil
	case raw[0] == '{':
		var h toolHead
		if err := json.Unmarshal(raw, &h); err != nil || h.Type != "function" || h.Function == nil || h.Function.Name == "" {
			return BadRequest("tool_choice", "named tool_choice must be {\"type\": \"function\", \"function\": {\"name\": …}}")
		}
		for _, t := range c.ToolDefs {
			if t.Name == h.Function.Name {
				c.ToolChoice = ToolChoice{Mode: "named", Name: t.Name}
				return nil
			}
		}
		return BadRequest("tool_choice", "tool_choice names function %q, which is not in tools", h.Function.Name)
	}
	return BadRequest("tool_choice", "tool_choice must be a string or an object")
}

// ContextError checks that the prompt and the requested output fit the
// model's context; param names the field to blame.
func ContextError(maxModelLen, promptLen int, maxTokens int32, param string) *Error {
	if maxModelLen <= 0 {
		return nil
	}
	if promptLen >= maxModelLen {
		return BadRequest(param, "This model's maximum context length is %d tokens. However, your prompt contains %d input tokens. Please reduce the length of the input prompt.", maxModelLen, promptLen)
	}
	if maxTokens > 0 && promptLen+int(maxTokens) > maxModelLen {
		return BadRequest("max_tokens", "This model's maximum context length is %d tokens. However, you requested %d output tokens and your prompt contains %d input tokens, for a total of %d tokens. Please reduce the length of the input prompt or the number of requested output tokens.", maxModelLen, maxTokens, promptLen, promptLen+int(maxTokens))
	}
	return nil
}
