package openai

import "testing"

// FuzzValidate feeds arbitrary bodies to both request decoders: they must
// return a result or an *Error with a 4xx status, never panic.
func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"prompt":"hi","max_tokens":5,"stop":["a"],"logit_bias":{"3":1}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`))
	f.Add([]byte(`{"prompt":[[1,2],[3]],"n":2,"logprobs":3,"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^a+$"}}}}},"structured_outputs":{"disable_any_whitespace":true}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}}],"tool_choice":"required","guided_regex":"a|b"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		lim := Limits{VocabSize: 100, MaxModelLen: 64}
		var cr CompletionRequest
		if e := Decode(body, &cr); e == nil {
			if _, e := cr.Validate(lim); e != nil && (e.Status < 400 || e.Status >= 500) {
				t.Fatalf("status %d", e.Status)
			}
		} else if e.Status != 400 {
			t.Fatalf("decode status %d", e.Status)
		}
		var chat ChatRequest
		if e := Decode(body, &chat); e == nil {
			if _, e := chat.Validate(lim, ToolConfig{AutoEnabled: true, Parser: "hermes"}); e != nil && (e.Status < 400 || e.Status >= 500) {
				t.Fatalf("status %d", e.Status)
			}
		}
	})
}

func TestPromptForms(t *testing.T) {
	lim := Limits{VocabSize: 100}
	cases := []struct {
		body  string
		n     int
		isIDs bool
	}{
		{`{"prompt":"hi"}`, 1, false},
		{`{"prompt":["a","b","c"]}`, 3, false},
		{`{"prompt":[1,2,3]}`, 1, true},
		{`{"prompt":[[1],[2,3]]}`, 2, true},
	}
	for _, tc := range cases {
		var r CompletionRequest
		if e := Decode([]byte(tc.body), &r); e != nil {
			t.Fatal(e)
		}
		c, e := r.Validate(lim)
		if e != nil {
			t.Fatalf("%s: %v", tc.body, e)
		}
		if len(c.Prompts) != tc.n || (len(c.Prompts[0].IDs) > 0) != tc.isIDs || c.Params.MaxTokens != 16 {
			t.Fatalf("%s: %+v", tc.body, c.Prompts)
		}
	}
}
