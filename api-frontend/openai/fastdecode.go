package openai

import (
	"encoding/json"
	"strconv"
)

// The request decoder's fast path: completions and chat bodies made of
// the fields a client usually sends (strings without escapes, numbers,
// booleans, the prompt and messages as raw JSON, stream_options) are
// decoded without encoding/json's reflection. It gives up (ok false) on
// anything else, and Decode then runs json.Unmarshal as before, so a body
// decodes to what json.Unmarshal gives, and every error is json.Unmarshal's:
// an unknown key (which json.Unmarshal might match without regard to case),
// a key given twice, a key or string with escapes, a field of another
// kind (stop_token_ids, logit_bias, response_format...), a value of the
// wrong type, a number out of its field's range, and any JSON syntax error
// anywhere in the body. FuzzFastDecode checks it against json.Unmarshal.

// maxFastDepth bounds the nesting the fast path's value scanner follows;
// deeper values go to json.Unmarshal (which has its own limit).
const maxFastDepth = 64

// maxFastKeys bounds the keys of a body the fast path takes.
const maxFastKeys = 48

// fastObject scans body, a JSON object with nothing after it, and calls
// field with each key's bytes (no escapes) and its value's bytes; it reports false
// when body is not such an object, a key repeats, or field returns false.
func fastObject(body []byte, field func(key, val []byte) bool) bool {
	var seen [maxFastKeys][]byte
	nseen := 0
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipWS(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipWS(body, i+1) == len(body)
	}
	for {
		key, j, ok := plainKey(body, i)
		if !ok {
			return false
		}
		for _, k := range seen[:nseen] {
			if string(k) == string(key) {
				return false
			}
		}
		if nseen == len(seen) {
			return false
		}
		seen[nseen] = key
		nseen++
		j = skipWS(body, j)
		if j >= len(body) || body[j] != ':' {
			return false
		}
		j = skipWS(body, j+1)
		end, ok := skipValue(body, j, 0)
		if !ok || !field(key, body[j:end]) {
			return false
		}
		i = skipWS(body, end)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = skipWS(body, i+1)
		case '}':
			return skipWS(body, i+1) == len(body)
		default:
			return false
		}
	}
}

// plainKey reads a string at body[i] that has no escape, control
// character or byte outside ASCII, and returns its bytes and the index
// after it.
func plainKey(body []byte, i int) ([]byte, int, bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		c := body[j]
		switch {
		case c == '"':
			return body[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue checks the JSON value at b[i] and returns the index after it.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxFastDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			end, ok := skipValue(b, i, depth+1)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '{':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			end, ok := skipString(b, i)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			end, ok = skipValue(b, skipWS(b, i+1), depth+1)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// skipString checks the JSON string at b[i] (escapes well formed, no
// control character; any other bytes, as encoding/json's scanner takes
// them) and returns the index after it.
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			j++
			if j >= len(b) {
				return 0, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipNumber checks the JSON number at b[i] and returns the index after it.
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > s
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

// literal checks that b[i:] starts with lit.
func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// The setters below take a value's bytes (a valid JSON value) and set a
// field as json.Unmarshal would, or report false where json.Unmarshal
// would fail or where the fast path does not follow it.

func isNullValue(v []byte) bool { return len(v) == 4 && v[0] == 'n' }

// setString: a string without escapes; null leaves the field.
func setString(dst *string, v []byte) bool {
	if isNullValue(v) {
		return true
	}
	s, ok := plainString(v)
	if ok {
		*dst = s
	}
	return ok
}

// setStringPtr: a string without escapes; null sets nil.
func setStringPtr(dst **string, v []byte) bool {
	if isNullValue(v) {
		*dst = nil
		return true
	}
	s, ok := plainString(v)
	if ok {
		*dst = &s
	}
	return ok
}

// setIntPtr: an integer in int64's range; null sets nil.
func setIntPtr(dst **int64, v []byte) bool {
	if isNullValue(v) {
		*dst = nil
		return true
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

// setFloatPtr: a number in float64's range; null sets nil.
func setFloatPtr(dst **float64, v []byte) bool {
	if isNullValue(v) {
		*dst = nil
		return true
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	*dst = &f
	return true
}

// setBool: true or false; null leaves the field.
func setBool(dst *bool, v []byte) bool {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
}

// setBoolPtr: true or false; null sets nil.
func setBoolPtr(dst **bool, v []byte) bool {
	var b bool
	switch string(v) {
	case "true":
		b = true
	case "false":
	case "null":
		*dst = nil
		return true
	default:
		return false
	}
	*dst = &b
	return true
}

// setRaw: any value, copied (null too: json.RawMessage keeps it).
func setRaw(dst *json.RawMessage, v []byte) bool {
	*dst = append(json.RawMessage(nil), v...)
	return true
}

// setRawList: an array, each element copied; null sets nil.
func setRawList(dst *[]json.RawMessage, v []byte) bool {
	if isNullValue(v) {
		*dst = nil
		return true
	}
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	out := make([]json.RawMessage, 0, 4)
	i := skipWS(v, 1)
	if v[i] != ']' {
		for {
			end, _ := skipValue(v, i, 0) // v is valid JSON
			out = append(out, append(json.RawMessage(nil), v[i:end]...))
			i = skipWS(v, end)
			if v[i] == ']' {
				break
			}
			i = skipWS(v, i+1)
		}
	}
	*dst = out
	return true
}

// setStreamOptions: an object of include_usage and continuous_usage_stats
// (booleans or null); null sets nil.
func setStreamOptions(dst **StreamOptions, v []byte) bool {
	if isNullValue(v) {
		*dst = nil
		return true
	}
	var o StreamOptions
	if !fastObject(v, func(key, val []byte) bool {
		switch string(key) {
		case "include_usage":
			return setBoolPtr(&o.IncludeUsage, val)
		case "continuous_usage_stats":
			return setBoolPtr(&o.ContinuousUsageStats, val)
		}
		return false
	}) {
		return false
	}
	*dst = &o
	return true
}

// fastField sets one of the shared fields; false for a key it does not
// take or a value it does not follow.
func (r *commonRequest) fastField(key, v []byte) bool {
	switch string(key) {
	case "model":
		return setString(&r.Model, v)
	case "max_tokens":
		return setIntPtr(&r.MaxTokens, v)
	case "temperature":
		return setFloatPtr(&r.Temperature, v)
	case "top_p":
		return setFloatPtr(&r.TopP, v)
	case "top_k":
		return setIntPtr(&r.TopK, v)
	case "min_p":
		return setFloatPtr(&r.MinP, v)
	case "n":
		return setIntPtr(&r.N, v)
	case "seed":
		return setIntPtr(&r.Seed, v)
	case "stop":
		return setRaw(&r.Stop, v)
	case "include_stop_str_in_output":
		return setBool(&r.IncludeStopStrInOutput, v)
	case "ignore_eos":
		return setBool(&r.IgnoreEOS, v)
	case "min_tokens":
		return setIntPtr(&r.MinTokens, v)
	case "presence_penalty":
		return setFloatPtr(&r.PresencePenalty, v)
	case "frequency_penalty":
		return setFloatPtr(&r.FrequencyPenalty, v)
	case "repetition_penalty":
		return setFloatPtr(&r.RepetitionPenalty, v)
	case "echo":
		return setBool(&r.Echo, v)
	case "stream":
		return setBool(&r.Stream, v)
	case "stream_options":
		return setStreamOptions(&r.StreamOptions, v)
	case "skip_special_tokens":
		return setBoolPtr(&r.SkipSpecialTokens, v)
	case "user":
		return setString(&r.User, v)
	case "stream_interval":
		return setIntPtr(&r.StreamInterval, v)
	case "priority":
		return setIntPtr(&r.Priority, v)
	case "request_id":
		return setString(&r.RequestID, v)
	case "guided_json":
		return setRaw(&r.GuidedJSON, v)
	case "guided_regex":
		return setStringPtr(&r.GuidedRegex, v)
	case "guided_grammar":
		return setStringPtr(&r.GuidedGrammar, v)
	}
	return false
}

// decodeFast decodes body into r (a zero value) on the fast path; false
// leaves r to json.Unmarshal (r may then hold part of the body).
func (r *CompletionRequest) decodeFast(body []byte) bool {
	return fastObject(body, func(key, v []byte) bool {
		switch string(key) {
		case "prompt":
			return setRaw(&r.Prompt, v)
		case "logprobs":
			return setIntPtr(&r.Logprobs, v)
		case "suffix":
			return setStringPtr(&r.Suffix, v)
		case "best_of":
			return setIntPtr(&r.BestOf, v)
		}
		return r.fastField(key, v)
	})
}

// decodeFast decodes body into r (a zero value) on the fast path; false
// leaves r to json.Unmarshal (r may then hold part of the body).
func (r *ChatRequest) decodeFast(body []byte) bool {
	return fastObject(body, func(key, v []byte) bool {
		switch string(key) {
		case "messages":
			return setRawList(&r.Messages, v)
		case "max_completion_tokens":
			return setIntPtr(&r.MaxCompletionTokens, v)
		case "logprobs":
			return setBoolPtr(&r.Logprobs, v)
		case "top_logprobs":
			return setIntPtr(&r.TopLogprobs, v)
		case "tools":
			return setRawList(&r.Tools, v)
		case "tool_choice":
			return setRaw(&r.ToolChoice, v)
		case "parallel_tool_calls":
			return setBoolPtr(&r.ParallelToolCalls, v)
		case "add_generation_prompt":
			return setBoolPtr(&r.AddGenerationPrompt, v)
		case "continue_final_message":
			return setBool(&r.ContinueFinalMessage, v)
		case "include_reasoning":
			return setBoolPtr(&r.IncludeReasoning, v)
		case "chat_template":
			return setStringPtr(&r.ChatTemplate, v)
		case "reasoning_effort":
			return setStringPtr(&r.ReasoningEffort, v)
		}
		return r.fastField(key, v)
	})
}
