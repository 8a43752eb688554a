package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Chunk
		text string
	}{
		{
			name: "completions token",
			data: `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" Hello","logprobs":null,"finish_reason":null}]}`,
			want: Chunk{Choices: 1, PromptTokens: -1, CompletionTokens: -1},
			text: " Hello",
		},
		{
			name: "chat role chunk",
			data: `{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			want: Chunk{Choices: 1, PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "chat content with escapes",
			data: `{"choices":[{"index":0,"delta":{"content":"a\"b\\c\n\u00e9\ud83d\ude00"}}]}`,
			want: Chunk{Choices: 1, PromptTokens: -1, CompletionTokens: -1},
			text: "a\"b\\c\né😀",
		},
		{
			name: "chat reasoning delta",
			data: `{"choices":[{"index":0,"delta":{"reasoning":"think","reasoning_content":"!"}}]}`,
			want: Chunk{Choices: 1, PromptTokens: -1, CompletionTokens: -1},
			text: "think!",
		},
		{
			name: "usage chunk",
			data: `{"id":"x","choices":[],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}}`,
			want: Chunk{HasUsage: true, PromptTokens: 12, CompletionTokens: 8},
		},
		{
			name: "continuous usage on token chunk",
			data: `{"choices":[{"text":"x"}],"usage":{"prompt_tokens":3,"completion_tokens":1.0}}`,
			want: Chunk{Choices: 1, HasUsage: true, PromptTokens: 3, CompletionTokens: 1},
			text: "x",
		},
		{
			name: "null usage and choices",
			data: `{"choices":null,"usage":null}`,
			want: Chunk{PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "vLLM mid-stream error",
			data: `{"error":{"message":"engine died","type":"InternalServerError","param":null,"code":500}}`,
			want: Chunk{IsError: true, ErrorMessage: "engine died", PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "string error",
			data: `{"error":"boom"}`,
			want: Chunk{IsError: true, ErrorMessage: "boom", PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "error object without message",
			data: `{"error":{"code":3}}`,
			want: Chunk{IsError: true, ErrorMessage: `{"code":3}`, PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "legacy object error",
			data: `{"object":"error","message":"bad","code":400}`,
			want: Chunk{IsError: true, ErrorMessage: "bad", PromptTokens: -1, CompletionTokens: -1},
		},
		{
			name: "n>1 only the first choice's text",
			data: `{"choices":[{"text":"a"},{"text":"b"}]}`,
			want: Chunk{Choices: 2, PromptTokens: -1, CompletionTokens: -1},
			text: "a",
		},
		{
			name: "deeply nested unknown members",
			data: `{"x":[[{"y":[1,2,{"z":"\u0041"}]}],true,false,null,-1.5e3],"choices":[{"logprobs":{"content":[{"token":"a","top_logprobs":[]}]},"text":"t"}]}`,
			want: Chunk{Choices: 1, PromptTokens: -1, CompletionTokens: -1},
			text: "t",
		},
	}
	var p Parser
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Chunk
			text, err := p.Parse([]byte(tc.data), &c, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c != tc.want {
				t.Fatalf("chunk = %+v, want %+v", c, tc.want)
			}
			if string(text) != tc.text {
				t.Fatalf("text = %q, want %q", text, tc.text)
			}
		})
	}
}

func TestParseChunkMalformed(t *testing.T) {
	for _, data := range []string{
		``, `[DONE]`, `{`, `{"choices":[`, `{"choices":[{"text":"a}]}`, `{"a":1,}`, `{"a" 1}`,
		`{"a":01}`, `{"a":-}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":tru}`, `{} {}`, `{"a":[1 2]}`,
		`{"a":{"b":1]}`, "{\"a\":\"\x01\"}", `{"usage":{"prompt_tokens":1e}}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
		`{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	} {
		var p Parser
		var c Chunk
		if _, err := p.Parse([]byte(data), &c, nil); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) err = %v, want ErrSyntax", data, err)
		}
	}
}

// refChunk computes what Parse should report using encoding/json's token
// stream, keeping duplicate keys in order (later members win, text from every
// occurrence accumulates) as Parse does.
func refChunk(data []byte) (Chunk, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return Chunk{}, "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Chunk{}, "", errors.New("trailing data")
	}
	c := Chunk{PromptTokens: -1, CompletionTokens: -1}
	obj, ok := v.([]member)
	if !ok {
		return Chunk{}, "", errors.New("not an object")
	}
	var text strings.Builder
	isErrObj, topMsg := false, ""
	for _, m := range obj {
		switch m.key {
		case "choices":
			arr, _ := m.val.([]any)
			c.Choices = len(arr)
			if len(arr) > 0 {
				if first, ok := arr[0].([]member); ok {
					for _, fm := range first {
						switch fm.key {
						case "text":
							if s, ok := fm.val.(string); ok {
								text.WriteString(s)
							}
						case "delta", "message":
							if d, ok := fm.val.([]member); ok {
								for _, dm := range d {
									if s, ok := dm.val.(string); ok && (dm.key == "content" || dm.key == "reasoning" || dm.key == "reasoning_content") {
										text.WriteString(s)
									}
								}
							}
						}
					}
				}
			}
		case "usage":
			if u, ok := m.val.([]member); ok {
				c.HasUsage = true
				for _, um := range u {
					n, ok := um.val.(json.Number)
					if !ok {
						continue
					}
					f, err := n.Float64()
					if err != nil || math.Abs(f) > 1<<53 {
						continue
					}
					switch um.key {
					case "prompt_tokens":
						c.PromptTokens = int(f)
					case "completion_tokens":
						c.CompletionTokens = int(f)
					}
				}
			}
		case "error":
			c.IsError = true
			switch e := m.val.(type) {
			case string:
				c.ErrorMessage = e
			case []member:
				c.ErrorMessage = ""
				for _, em := range e {
					if s, ok := em.val.(string); ok && em.key == "message" {
						c.ErrorMessage = s
					}
				}
				if c.ErrorMessage == "" {
					c.ErrorMessage = "<raw>"
				}
			default:
				c.ErrorMessage = "<raw>"
			}
		case "object":
			s, ok := m.val.(string)
			isErrObj = ok && s == "error"
		case "message":
			if s, ok := m.val.(string); ok {
				topMsg = s
			}
		}
	}
	if isErrObj && !c.IsError {
		c.IsError, c.ErrorMessage = true, topMsg
	}
	return c, text.String(), nil
}

// member is one key/value of an object, kept in order.
type member struct {
	key string
	val any
}

func readValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := tok.(type) {
	case json.Delim:
		switch d {
		case '{':
			var obj []member
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, member{k.(string), v})
			}
			_, err := dec.Token()
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
	}
	return tok, nil
}

// FuzzParseChunk checks Parse never panics, accepts every valid JSON object
// and agrees with encoding/json on what it extracts.
func FuzzParseChunk(f *testing.F) {
	f.Add(`{"choices":[{"index":0,"delta":{"content":"hi","reasoning":"r"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	f.Add(`{"choices":[{"text":"\ud83d\ude00\udc00"}],"error":{"message":"m"}}`)
	f.Add(`{"object":"error","message":"x","choices":[1,{"a":[]}]}`)
	f.Add(`{"usage":{"completion_tokens":-3.7e2},"x":[{},[],"",0]}`)
	f.Fuzz(func(t *testing.T, data string) {
		var p Parser
		var c Chunk
		text, err := p.Parse([]byte(data), &c, nil)
		if !json.Valid([]byte(data)) || strings.Count(data, "[")+strings.Count(data, "{") > 400 {
			return
		}
		want, wantText, rerr := refChunk([]byte(data))
		if rerr != nil {
			if err == nil && data[0] != '{' && strings.TrimSpace(data)[0] != '{' {
				t.Fatalf("Parse accepted non-object %q", data)
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse rejected valid JSON %q: %v", data, err)
		}
		if want.ErrorMessage == "<raw>" && c.IsError {
			want.ErrorMessage = c.ErrorMessage
		}
		if c != want {
			t.Fatalf("Parse(%q) = %+v, want %+v", data, c, want)
		}
		if utf8.ValidString(data) && string(text) != wantText {
			t.Fatalf("text = %q, want %q", text, wantText)
		}
	})
}

func BenchmarkParseChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	var p Parser
	var c Chunk
	text := make([]byte, 0, 1<<16)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		text, _ = p.Parse(data, &c, text[:0])
	}
}
