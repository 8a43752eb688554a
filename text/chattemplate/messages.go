package chattemplate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file turns OpenAI chat messages into the conversation a chat
// template sees, as vLLM does for templates that take string content:
// content parts are flattened to text joined by "\n", a null content is "",
// and the string arguments of assistant tool calls are parsed into (ordered)
// objects.

// textPartKey maps the content-part types that carry text to the field
// holding it; other part types (images, audio) are rejected.
var textPartKey = map[string]string{"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}

func convertMessages(raw []json.RawMessage) ([]any, error) {
	out := make([]any, 0, len(raw))
	for i, r := range raw {
		m, err := convertMessage(r)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// convertMessage turns one OpenAI message into the dict a template sees.
// It reads only the keys it needs (role, content, name, tool_calls,
// tool_call_id, the reasoning fields), so it first splits the object into
// its keys' raw values and decodes just those; a message that path cannot
// take (not an object, a non-string role, any decoding error) goes through
// the whole-message decoder, which gives the canonical error.
// FuzzConvertMessage checks that both paths agree.
func convertMessage(raw json.RawMessage) (*exec.Dict, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil && fields != nil {
		if r := fields["role"]; len(r) > 0 && r[0] == '"' {
			get := func(key string) (any, bool, error) {
				v, ok := fields[key]
				if !ok {
					return nil, false, nil
				}
				d, err := rawValue(v)
				return d, true, err
			}
			if m, err := buildMessage(get); err == nil {
				return m, nil
			}
		}
	}
	return convertMessageSlow(raw)
}

// rawValue decodes one JSON value as fromJSON does, strings and null
// without its token decoder.
func rawValue(v json.RawMessage) (any, error) {
	switch {
	case len(v) > 0 && v[0] == '"':
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	case string(v) == "null":
		return nil, nil
	}
	return fromJSON(v)
}

// convertMessageSlow is convertMessage through the whole-message decoder.
func convertMessageSlow(raw json.RawMessage) (*exec.Dict, error) {
	v, err := fromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("parse message: %w", err)
	}
	src, ok := v.(*exec.Dict)
	if !ok {
		return nil, fmt.Errorf("message is not a JSON object")
	}
	return buildMessage(func(key string) (any, bool, error) {
		v, ok := dictGet(src, key)
		return v, ok, nil
	})
}

// buildMessage builds the template's message dict from the message's
// fields (get returns a key's decoded value and whether it is present).
func buildMessage(get func(key string) (any, bool, error)) (*exec.Dict, error) {
	roleV, _, err := get("role")
	if err != nil {
		return nil, err
	}
	role, ok := roleV.(string)
	if !ok {
		return nil, fmt.Errorf("message has no string role")
	}
	contentV, _, err := get("content")
	if err != nil {
		return nil, err
	}
	content, err := flattenContent(contentV)
	if err != nil {
		return nil, err
	}
	out := exec.NewDict()
	setPair(out, "role", role)
	setPair(out, "content", content)
	if role == "assistant" {
		if tc, ok, err := get("tool_calls"); err != nil {
			return nil, err
		} else if ok && tc != nil {
			calls, err := convertToolCalls(tc)
			if err != nil {
				return nil, err
			}
			setPair(out, "tool_calls", calls)
		}
		// Reasoning goes under every name templates read it by:
		// reasoning_content (Qwen3, DeepSeek), reasoning, and thinking
		// (gpt-oss's harmony template, as llama.cpp passes it).
		for _, key := range []string{"reasoning", "reasoning_content", "thinking"} {
			r, ok, err := get(key)
			if err != nil {
				return nil, err
			}
			if ok && r != nil {
				setPair(out, "reasoning", r)
				setPair(out, "reasoning_content", r)
				setPair(out, "thinking", r)
				break
			}
		}
	}
	if role == "tool" {
		if id, ok, err := get("tool_call_id"); err != nil {
			return nil, err
		} else if ok {
			setPair(out, "tool_call_id", id)
		}
	}
	if name, ok, err := get("name"); err != nil {
		return nil, err
	} else if ok {
		if s, ok := name.(string); ok {
			setPair(out, "name", s)
		}
	}
	return out, nil
}

// flattenContent turns a string, null or a list of content parts into a
// string.
func flattenContent(v any) (string, error) {
	switch c := v.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var texts []string
		for i, p := range c {
			switch part := p.(type) {
			case string:
				texts = append(texts, part)
			case *exec.Dict:
				typ, _ := dictGet(part, "type")
				ts, _ := typ.(string)
				key, ok := textPartKey[ts]
				if !ok {
					return "", fmt.Errorf("content[%d]: content part type %q is not supported", i, ts)
				}
				text, _ := dictGet(part, key)
				s, ok := text.(string)
				if !ok {
					return "", fmt.Errorf("content[%d]: %s part has no string %q", i, ts, key)
				}
				texts = append(texts, s)
			default:
				return "", fmt.Errorf("content[%d]: not a content part object", i)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("content must be a string, null or a list of parts")
}

// convertToolCalls parses each call's function.arguments from a JSON string
// into an object (empty or null arguments become {}), as vLLM does before
// rendering.
func convertToolCalls(v any) ([]any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("tool_calls must be a list")
	}
	for i, c := range list {
		call, ok := c.(*exec.Dict)
		if !ok {
			return nil, fmt.Errorf("tool_calls[%d] is not an object", i)
		}
		fv, _ := dictGet(call, "function")
		fn, ok := fv.(*exec.Dict)
		if !ok {
			continue
		}
		args, _ := dictGet(fn, "arguments")
		switch a := args.(type) {
		case nil:
			setPair(fn, "arguments", exec.NewDict())
		case string:
			if a == "" {
				setPair(fn, "arguments", exec.NewDict())
				continue
			}
			parsed, err := fromJSON([]byte(a))
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d].function.arguments is not valid JSON: %w", i, err)
			}
			setPair(fn, "arguments", parsed)
		}
	}
	return list, nil
}

func convertTools(raw []json.RawMessage) ([]any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]any, 0, len(raw))
	for i, r := range raw {
		v, err := fromJSON(r)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if _, ok := v.(*exec.Dict); !ok {
			return nil, fmt.Errorf("tools[%d] is not a JSON object", i)
		}
		out = append(out, v)
	}
	return out, nil
}

// convertKwarg turns a chat_template_kwargs value (as decoded by
// encoding/json) into a template value: whole floats become ints, maps
// become dicts with sorted keys.
func convertKwarg(v any) any {
	switch t := v.(type) {
	case float64:
		if t == float64(int(t)) && t >= -1e15 && t <= 1e15 {
			return int(t)
		}
		return t
	case json.RawMessage:
		if parsed, err := fromJSON(t); err == nil {
			return parsed
		}
		return string(t)
	case map[string]any:
		raw, err := json.Marshal(t)
		if err != nil {
			return t
		}
		parsed, err := fromJSON(raw)
		if err != nil {
			return t
		}
		return parsed
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = convertKwarg(e)
		}
		return out
	}
	return v
}
