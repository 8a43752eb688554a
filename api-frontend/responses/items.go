package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/api-frontend/openai"
)

// builder turns Responses items into chat messages: function calls and
// reasoning join the assistant message they belong to.
type builder struct {
	out    []openai.Message
	open   Opener
	cur    *openai.Message // the assistant message being built
	reason string          // reasoning waiting for the next assistant message
	calls  map[string]bool
}

func (b *builder) add(m openai.Message) {
	b.flush()
	b.out = append(b.out, m)
}

// assistant returns the assistant message being built, starting one.
func (b *builder) assistant() *openai.Message {
	if b.cur == nil {
		b.cur = &openai.Message{Role: "assistant", ReasoningContent: b.reason}
		b.reason = ""
	}
	return b.cur
}

// flush ends the assistant message being built.
func (b *builder) flush() {
	if b.cur != nil {
		b.out = append(b.out, *b.cur)
		b.cur = nil
	}
}

// item is the union of the input item shapes this server reads.
type item struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        *string         `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	Summary          json.RawMessage `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

// item adds one input item; where names it in errors.
func (b *builder) item(raw json.RawMessage, where string) *openai.Error {
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		return openai.BadRequest("input", "%s must be an object with a type", where)
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	switch it.Type {
	case "message":
		text, ok := stringOrText(it.Content)
		if !ok {
			if strings.Contains(string(it.Content), `"input_image"`) || strings.Contains(string(it.Content), `"input_file"`) {
				return openai.BadRequest("input", "%s: image and file inputs are not supported by this server", where)
			}
			return openai.BadRequest("input", "%s.content must be a string or a list of input_text/output_text parts", where)
		}
		switch it.Role {
		case "assistant":
			a := b.assistant()
			if len(a.ToolCalls) > 0 { // text after calls: a new turn
				b.flush()
				a = b.assistant()
			}
			a.Content += text
		case "user", "system", "developer":
			b.add(openai.Message{Role: it.Role, Content: text})
		default:
			return openai.BadRequest("input", "%s.role must be user, assistant, system or developer, got %q", where, it.Role)
		}
	case "function_call":
		if it.CallID == "" || it.Name == "" || it.Arguments == nil {
			return openai.BadRequest("input", "%s: a function_call needs call_id, name and arguments", where)
		}
		var tc openai.ToolCallItem
		tc.ID, tc.Type = it.CallID, "function"
		tc.Function.Name, tc.Function.Arguments = it.Name, *it.Arguments
		a := b.assistant()
		a.ToolCalls = append(a.ToolCalls, tc)
		if b.calls == nil {
			b.calls = map[string]bool{}
		}
		b.calls[it.CallID] = true
	case "function_call_output":
		if it.CallID == "" {
			return openai.BadRequest("input", "%s: a function_call_output needs call_id", where)
		}
		if !b.calls[it.CallID] {
			return openai.BadRequest("input", "%s: no function_call with call_id %q precedes this function_call_output", where, it.CallID)
		}
		out, ok := stringOrText(it.Output)
		if !ok {
			return openai.BadRequest("input", "%s.output must be a string or a list of text parts", where)
		}
		b.add(openai.Message{Role: "tool", Content: out, ToolCallID: it.CallID})
	case "reasoning":
		text, e := b.reasoningText(&it, where)
		if e != nil {
			return e
		}
		b.flush()
		b.reason += text
	case "item_reference":
		// A reference to an item OpenAI stores server-side; the history of
		// previous_response_id already carries this server's items.
	default:
		// Hosted tool calls and outputs (web_search_call, …) have no
		// meaning for this model.
	}
	return nil
}

// reasoningText reads a reasoning item: its content, else its summary,
// else its encrypted_content (sealed by this server).
func (b *builder) reasoningText(it *item, where string) (string, *openai.Error) {
	if text, ok := stringOrText(it.Content); ok && text != "" {
		return text, nil
	}
	if text, ok := stringOrText(it.Summary); ok && text != "" {
		return text, nil
	}
	if it.EncryptedContent != nil && *it.EncryptedContent != "" && b.open != nil {
		text, err := b.open.Open(*it.EncryptedContent)
		if err != nil {
			return "", openai.BadRequest("input", "%s.encrypted_content: %v", where, err)
		}
		return text, nil
	}
	return "", nil
}

// Hosted tool types: run by OpenAI's servers, not by a self-hosted model.
var hosted = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_2025_08_26": true, "web_search_preview_2025_03_11": true,
	"file_search": true, "code_interpreter": true, "image_generation": true, "computer_use_preview": true,
	"computer_use": true, "mcp": true, "local_shell": true, "shell": true, "custom": true, "apply_patch": true,
}

// funcTool is a Responses function tool.
type funcTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Tools       json.RawMessage `json:"tools"` // namespace
}

// mapTools returns chat tools, the names the model sees, and the hosted
// tools left out.
func mapTools(in []json.RawMessage) (out []json.RawMessage, names map[string]bool, dropped []string, e *openai.Error) {
	names = map[string]bool{}
	type flat struct {
		ns string
		t  funcTool
	}
	var all []flat
	for i, raw := range in {
		var t funcTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, nil, openai.BadRequest("tools", "tools[%d] must be an object with a type", i)
		}
		switch {
		case t.Type == "function":
			if t.Name == "" {
				return nil, nil, nil, openai.BadRequest("tools", "tools[%d]: a function tool needs a name", i)
			}
			all = append(all, flat{t: t})
		case t.Type == "namespace":
			var sub []funcTool
			if t.Name == "" || json.Unmarshal(t.Tools, &sub) != nil {
				return nil, nil, nil, openai.BadRequest("tools", "tools[%d]: a namespace tool needs a name and a list of tools", i)
			}
			for j, s := range sub {
				if s.Type != "function" && s.Type != "" {
					dropped = append(dropped, s.Type)
					continue
				}
				if s.Name == "" {
					return nil, nil, nil, openai.BadRequest("tools", "tools[%d].tools[%d]: a function tool needs a name", i, j)
				}
				all = append(all, flat{ns: t.Name, t: s})
			}
		case t.Type == "":
			return nil, nil, nil, openai.BadRequest("tools", "tools[%d] has no type", i)
		default:
			dropped = append(dropped, t.Type)
		}
	}
	count := map[string]int{}
	for _, f := range all {
		count[f.t.Name]++
	}
	for _, f := range all {
		name := f.t.Name
		if count[name] > 1 && f.ns != "" {
			name = f.ns + "__" + name
		}
		if names[name] {
			return nil, nil, nil, openai.BadRequest("tools", "two tools are named %q", name)
		}
		names[name] = true
		fn := map[string]any{"name": name}
		if f.t.Description != nil {
			fn["description"] = *f.t.Description
		}
		if !isNull(f.t.Parameters) {
			fn["parameters"] = f.t.Parameters
		}
		if f.t.Strict != nil {
			fn["strict"] = *f.t.Strict
		}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, nil, nil, openai.BadRequest("tools", "encode tool %s: %v", name, err)
		}
		out = append(out, raw)
	}
	return out, names, dropped, nil
}

// mapToolChoice turns tool_choice into chat's; auto becomes "unset" so that
// the server's auto setting decides, as chat does without tool_choice.
func mapToolChoice(raw json.RawMessage, names map[string]bool) (json.RawMessage, *openai.Error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return nil, nil
		case "none", "required":
			if s == "required" && len(names) == 0 {
				return nil, openai.BadRequest("tool_choice", "tool_choice required needs function tools")
			}
			return json.RawMessage(fmt.Sprintf("%q", s)), nil
		}
		return nil, openai.BadRequest("tool_choice", "tool_choice must be none, auto, required or an object, got %q", s)
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, openai.BadRequest("tool_choice", "tool_choice must be a string or an object")
	}
	switch o.Type {
	case "function":
		if !names[o.Name] {
			return nil, openai.BadRequest("tool_choice", "tool_choice names function %q, which is not in tools", o.Name)
		}
		out, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": o.Name}})
		return out, nil
	case "allowed_tools":
		if o.Mode == "required" && len(names) > 0 {
			return json.RawMessage(`"required"`), nil
		}
		return nil, nil
	case "":
		return nil, openai.BadRequest("tool_choice", "tool_choice object has no type")
	}
	return nil, nil // a hosted tool: the model decides
}
