package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// DefaultName and ToolUseName are the conventional names in a
// tokenizer_config.json that holds several chat templates.
const (
	DefaultName = "default"
	ToolUseName = "tool_use"
)

// TokenizerConfig is what the frontend needs from tokenizer_config.json.
type TokenizerConfig struct {
	// Templates maps template names to sources; a single chat_template
	// string is stored under DefaultName.
	Templates map[string]string
	// BOSToken and EOSToken are the bos_token and eos_token strings ("" if
	// absent).
	BOSToken, EOSToken string
}

// ParseTokenizerConfig reads chat_template (a string, or a list of
// {name, template}) and the bos/eos token strings (plain strings or
// {content: ...} objects) from a tokenizer_config.json.
func ParseTokenizerConfig(data []byte) (*TokenizerConfig, error) {
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOSToken     json.RawMessage `json:"bos_token"`
		EOSToken     json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse tokenizer config: %w", err)
	}
	cfg := &TokenizerConfig{Templates: map[string]string{}}
	if err := parseTemplates(raw.ChatTemplate, cfg.Templates); err != nil {
		return nil, err
	}
	cfg.BOSToken = tokenString(raw.BOSToken)
	cfg.EOSToken = tokenString(raw.EOSToken)
	return cfg, nil
}

func parseTemplates(raw json.RawMessage, into map[string]string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var single string
	if err := json.Unmarshal(raw, &single); err == nil {
		into[DefaultName] = single
		return nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("parse chat_template: not a string or a list of {name, template}: %w", err)
	}
	for _, t := range list {
		into[t.Name] = t.Template
	}
	return nil
}

// tokenString reads a special token written as a string or as an
// AddedToken object {"content": ...}.
func tokenString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// Load reads a --chat-template file: either raw Jinja text, stored under
// DefaultName, or a JSON object holding chat_template (as in
// tokenizer_config.json; a JSON object without one is an error).
func Load(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load chat template %s: %w", path, err)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		var probe map[string]json.RawMessage
		if json.Unmarshal(trimmed, &probe) == nil {
			if _, ok := probe["chat_template"]; !ok {
				return nil, fmt.Errorf("load chat template %s: JSON file has no chat_template", path)
			}
			cfg, err := ParseTokenizerConfig(trimmed)
			if err != nil {
				return nil, fmt.Errorf("load chat template %s: %w", path, err)
			}
			if len(cfg.Templates) == 0 {
				return nil, fmt.Errorf("load chat template %s: chat_template is empty", path)
			}
			return cfg.Templates, nil
		}
	}
	return map[string]string{DefaultName: string(data)}, nil
}

// Pick selects a template source as transformers does: the named one when
// name is given; otherwise tool_use when the request has tools and the set
// has one; otherwise default; a single unnamed template is always chosen.
func Pick(templates map[string]string, name string, hasTools bool) (string, error) {
	if name != "" {
		if src, ok := templates[name]; ok {
			return src, nil
		}
		return "", &Error{Message: fmt.Sprintf("chat template %q not found; available: %s", name, names(templates))}
	}
	if hasTools {
		if src, ok := templates[ToolUseName]; ok {
			return src, nil
		}
	}
	if src, ok := templates[DefaultName]; ok {
		return src, nil
	}
	if len(templates) == 1 {
		for _, src := range templates {
			return src, nil
		}
	}
	if len(templates) == 0 {
		return "", &Error{Message: "the model has no chat template; pass --chat-template"}
	}
	return "", &Error{Message: fmt.Sprintf("no default chat template; choose one of: %s", names(templates))}
}

func names(templates map[string]string) string {
	out := make([]string, 0, len(templates))
	for n := range templates {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
