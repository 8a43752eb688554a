package tokfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// TokenizerConfig is what Sluice uses of tokenizer_config.json.
type TokenizerConfig struct {
	// ChatTemplate is the default chat template ("" if none).
	ChatTemplate string
	// ChatTemplates holds named templates when the file gives a list
	// ({name, template}); the "default" entry is also ChatTemplate.
	ChatTemplates map[string]string
	// BOSToken, EOSToken, UnkToken, PadToken are token texts ("" if unset).
	BOSToken, EOSToken, UnkToken, PadToken string
	// AddBOSToken and AddEOSToken are nil when the file does not say.
	AddBOSToken, AddEOSToken *bool
	// TokenizerClass is e.g. "LlamaTokenizer" or "Qwen2Tokenizer".
	TokenizerClass string
	// AddedTokensDecoder maps id strings to added tokens.
	AddedTokensDecoder map[string]AddedToken
}

type rawTokenizerConfig struct {
	ChatTemplate       json.RawMessage       `json:"chat_template"`
	BOSToken           json.RawMessage       `json:"bos_token"`
	EOSToken           json.RawMessage       `json:"eos_token"`
	UnkToken           json.RawMessage       `json:"unk_token"`
	PadToken           json.RawMessage       `json:"pad_token"`
	AddBOSToken        *bool                 `json:"add_bos_token"`
	AddEOSToken        *bool                 `json:"add_eos_token"`
	TokenizerClass     string                `json:"tokenizer_class"`
	AddedTokensDecoder map[string]AddedToken `json:"added_tokens_decoder"`
}

// ReadTokenizerConfig reads tokenizer_config.json.
func ReadTokenizerConfig(path string) (*TokenizerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer config: %w", err)
	}
	c, err := ParseTokenizerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseTokenizerConfig parses tokenizer_config.json content.
func ParseTokenizerConfig(data []byte) (*TokenizerConfig, error) {
	var raw rawTokenizerConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	c := &TokenizerConfig{
		AddBOSToken:        raw.AddBOSToken,
		AddEOSToken:        raw.AddEOSToken,
		TokenizerClass:     raw.TokenizerClass,
		AddedTokensDecoder: raw.AddedTokensDecoder,
	}
	var err error
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{
		{"bos_token", raw.BOSToken, &c.BOSToken},
		{"eos_token", raw.EOSToken, &c.EOSToken},
		{"unk_token", raw.UnkToken, &c.UnkToken},
		{"pad_token", raw.PadToken, &c.PadToken},
	} {
		if *f.dst, err = tokenText(f.raw); err != nil {
			return nil, fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	if len(raw.ChatTemplate) > 0 && string(raw.ChatTemplate) != "null" {
		var s string
		if err := json.Unmarshal(raw.ChatTemplate, &s); err == nil {
			c.ChatTemplate = s
		} else {
			var list []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(raw.ChatTemplate, &list); err != nil {
				return nil, fmt.Errorf("field chat_template: neither a string nor a list of {name, template}")
			}
			c.ChatTemplates = make(map[string]string, len(list))
			for i, e := range list {
				if e.Name == "" {
					return nil, fmt.Errorf("field chat_template[%d]: missing name", i)
				}
				c.ChatTemplates[e.Name] = e.Template
			}
			c.ChatTemplate = c.ChatTemplates["default"]
		}
	}
	return c, nil
}

// tokenText accepts a string, null, or an AddedToken object {"content": ...}.
func tokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("neither a string nor an object with content: %s", truncate(raw))
	}
	return *obj.Content, nil
}

// GenerationConfig is what Sluice uses of generation_config.json.
type GenerationConfig struct {
	// EOSTokenIDs are the ids that end generation (eos_token_id may be an
	// int or a list in the file).
	EOSTokenIDs []int
	// BOSTokenID is -1 when unset.
	BOSTokenID int
	// PadTokenID is -1 when unset.
	PadTokenID int
}

// ReadGenerationConfig reads generation_config.json.
func ReadGenerationConfig(path string) (*GenerationConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read generation config: %w", err)
	}
	g, err := ParseGenerationConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGenerationConfig parses generation_config.json content.
func ParseGenerationConfig(data []byte) (*GenerationConfig, error) {
	var raw struct {
		EOS json.RawMessage `json:"eos_token_id"`
		BOS json.RawMessage `json:"bos_token_id"`
		Pad json.RawMessage `json:"pad_token_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse generation_config.json: %w", err)
	}
	g := &GenerationConfig{BOSTokenID: -1, PadTokenID: -1}
	eos, err := intOrList(raw.EOS)
	if err != nil {
		return nil, fmt.Errorf("field eos_token_id: %w", err)
	}
	g.EOSTokenIDs = eos
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *int
	}{{"bos_token_id", raw.BOS, &g.BOSTokenID}, {"pad_token_id", raw.Pad, &g.PadTokenID}} {
		l, err := intOrList(f.raw)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.name, err)
		}
		if len(l) > 0 {
			*f.dst = l[0]
		}
	}
	return g, nil
}

func intOrList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			return nil, fmt.Errorf("negative id %d", n)
		}
		return []int{n}, nil
	}
	var l []int
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("neither an int nor a list of ints: %s", truncate(raw))
	}
	for _, x := range l {
		if x < 0 {
			return nil, fmt.Errorf("negative id %d", x)
		}
	}
	return l, nil
}
