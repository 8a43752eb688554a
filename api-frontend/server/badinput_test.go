package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBadInput sends malformed requests and checks the status and the
// error's param. None may produce a 500.
func TestBadInput(t *testing.T) {
	env := newTestEnv(t, Config{MaxBodyBytes: 4096, EnableAutoToolChoice: false}, "hello")
	const C, H = "/v1/completions", "/v1/chat/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]`
	cases := []struct {
		name, path, body string
		status           int
		param            string // "" means null
	}{
		{"empty body", C, ``, 400, ""},
		{"not json", C, `{"prompt": `, 400, ""},
		{"array body", C, `[1,2]`, 400, ""},
		{"string body", C, `"x"`, 400, ""},
		{"missing prompt", C, `{"model":"m"}`, 400, "prompt"},
		{"null prompt", C, `{"prompt":null}`, 400, "prompt"},
		{"empty prompt", C, `{"prompt":""}`, 400, "prompt"},
		{"empty prompt list", C, `{"prompt":[]}`, 400, "prompt"},
		{"prompt number", C, `{"prompt":5}`, 400, "prompt"},
		{"prompt object", C, `{"prompt":{"a":1}}`, 400, "prompt"},
		{"prompt mixed list", C, `{"prompt":["a",1]}`, 400, "prompt"},
		{"prompt token out of vocab", C, `{"prompt":[1,2,999]}`, 400, "prompt"},
		{"prompt negative token", C, `{"prompt":[-1]}`, 400, "prompt"},
		{"prompt nested empty", C, `{"prompt":[[]]}`, 400, "prompt"},
		{"prompt float token", C, `{"prompt":[1.5]}`, 400, "prompt"},
		{"unknown model", C, `{"model":"nope","prompt":"hi"}`, 404, "model"},
		{"model wrong type", C, `{"model":3,"prompt":"hi"}`, 400, "model"},
		{"max_tokens zero", C, `{"prompt":"hi","max_tokens":0}`, 400, "max_tokens"},
		{"max_tokens negative", C, `{"prompt":"hi","max_tokens":-5}`, 400, "max_tokens"},
		{"max_tokens string", C, `{"prompt":"hi","max_tokens":"10"}`, 400, "max_tokens"},
		{"max_tokens float", C, `{"prompt":"hi","max_tokens":1.5}`, 400, "max_tokens"},
		{"context overflow", C, `{"prompt":"hi","max_tokens":1000}`, 400, "max_tokens"},
		{"prompt too long", C, `{"prompt":"` + strings.Repeat("x", 300) + `"}`, 400, "prompt"},
		{"temperature negative", C, `{"prompt":"hi","temperature":-1}`, 400, "temperature"},
		{"temperature string", C, `{"prompt":"hi","temperature":"hot"}`, 400, "temperature"},
		{"top_p zero", C, `{"prompt":"hi","top_p":0}`, 400, "top_p"},
		{"top_p above one", C, `{"prompt":"hi","top_p":1.5}`, 400, "top_p"},
		{"top_k below -1", C, `{"prompt":"hi","top_k":-2}`, 400, "top_k"},
		{"min_p above one", C, `{"prompt":"hi","min_p":2}`, 400, "min_p"},
		{"n zero", C, `{"prompt":"hi","n":0}`, 400, "n"},
		{"n too large", C, `{"prompt":"hi","n":100000}`, 400, "n"},
		{"n bool", C, `{"prompt":"hi","n":true}`, 400, "n"},
		{"seed string", C, `{"prompt":"hi","seed":"x"}`, 400, "seed"},
		{"stop number", C, `{"prompt":"hi","stop":5}`, 400, "stop"},
		{"stop list of numbers", C, `{"prompt":"hi","stop":[1,2]}`, 400, "stop"},
		{"stop empty string", C, `{"prompt":"hi","stop":""}`, 400, "stop"},
		{"stop_token_ids out of vocab", C, `{"prompt":"hi","stop_token_ids":[5000]}`, 400, "stop_token_ids"},
		{"stop_token_ids not list", C, `{"prompt":"hi","stop_token_ids":7}`, 400, "stop_token_ids"},
		{"min_tokens negative", C, `{"prompt":"hi","min_tokens":-1}`, 400, "min_tokens"},
		{"min_tokens above max_tokens", C, `{"prompt":"hi","min_tokens":10,"max_tokens":5}`, 400, "min_tokens"},
		{"presence_penalty out of range", C, `{"prompt":"hi","presence_penalty":3}`, 400, "presence_penalty"},
		{"frequency_penalty out of range", C, `{"prompt":"hi","frequency_penalty":-3}`, 400, "frequency_penalty"},
		{"repetition_penalty zero", C, `{"prompt":"hi","repetition_penalty":0}`, 400, "repetition_penalty"},
		{"logit_bias bad key", C, `{"prompt":"hi","logit_bias":{"abc":1}}`, 400, "logit_bias"},
		{"logit_bias out of range", C, `{"prompt":"hi","logit_bias":{"5":500}}`, 400, "logit_bias"},
		{"logit_bias wrong type", C, `{"prompt":"hi","logit_bias":[1]}`, 400, "logit_bias"},
		{"logprobs too many", C, `{"prompt":"hi","logprobs":50}`, 400, "logprobs"},
		{"logprobs negative", C, `{"prompt":"hi","logprobs":-1}`, 400, "logprobs"},
		{"logprobs bool on completions", C, `{"prompt":"hi","logprobs":true}`, 400, "logprobs"},
		{"echo with logprobs", C, `{"prompt":"hi","echo":true,"logprobs":1}`, 400, "echo"},
		{"stream_options without stream", C, `{"prompt":"hi","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"stream_options wrong type", C, `{"prompt":"hi","stream":true,"stream_options":{"include_usage":"yes"}}`, 400, "stream_options.include_usage"},
		{"stream not bool", C, `{"prompt":"hi","stream":"yes"}`, 400, "stream"},
		{"stream_interval zero", C, `{"prompt":"hi","stream_interval":0}`, 400, "stream_interval"},
		{"echo not bool", C, `{"prompt":"hi","echo":1}`, 400, "echo"},
		{"suffix", C, `{"prompt":"hi","suffix":"x"}`, 400, "suffix"},
		{"body too large", C, `{"prompt":"` + strings.Repeat("x", 5000) + `"}`, 413, ""},
		{"chat missing messages", H, `{"model":"m"}`, 400, "messages"},
		{"chat empty messages", H, `{"messages":[]}`, 400, "messages"},
		{"chat messages not list", H, `{"messages":"hi"}`, 400, "messages"},
		{"chat message not object", H, `{"messages":["hi"]}`, 400, "messages"},
		{"chat message no role", H, `{"messages":[{"content":"hi"}]}`, 400, "messages"},
		{"chat message bad role", H, `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages"},
		{"chat content number", H, `{"messages":[{"role":"user","content":5}]}`, 400, "messages"},
		{"chat content image part", H, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages"},
		{"chat unknown model", H, `{"model":"gpt-9",` + msgs + `}`, 404, "model"},
		{"chat max_completion_tokens zero", H, `{` + msgs + `,"max_completion_tokens":0}`, 400, "max_completion_tokens"},
		{"chat context overflow", H, `{` + msgs + `,"max_tokens":100000}`, 400, "max_tokens"},
		{"chat top_logprobs without logprobs", H, `{` + msgs + `,"top_logprobs":3}`, 400, "top_logprobs"},
		{"chat top_logprobs too many", H, `{` + msgs + `,"logprobs":true,"top_logprobs":21}`, 400, "top_logprobs"},
		{"chat logprobs int", H, `{` + msgs + `,"logprobs":3}`, 400, "logprobs"},
		{"chat tools empty", H, `{` + msgs + `,"tools":[]}`, 400, "tools"},
		{"chat tool without name", H, `{` + msgs + `,"tools":[{"type":"function","function":{}}]}`, 400, "tools"},
		{"chat tool_choice without tools", H, `{` + msgs + `,"tool_choice":"required"}`, 400, "tool_choice"},
		{"chat tool_choice auto not enabled", H, `{` + msgs + `,` + tools + `,"tool_choice":"auto"}`, 400, "tool_choice"},
		{"chat tool_choice unknown string", H, `{` + msgs + `,` + tools + `,"tool_choice":"maybe"}`, 400, "tool_choice"},
		{"chat tool_choice unknown function", H, `{` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"g"}}}`, 400, "tool_choice"},
		{"chat continue_final with generation prompt", H, `{"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true}`, 400, "continue_final_message"},
		{"chat continue_final not assistant", H, `{` + msgs + `,"continue_final_message":true,"add_generation_prompt":false}`, 400, "continue_final_message"},
		{"chat per-request template", H, `{` + msgs + `,"chat_template":"x"}`, 400, "chat_template"},
		{"chat temperature too high", H, `{` + msgs + `,"temperature":1000}`, 400, "temperature"},
		{"chat kwargs wrong type", H, `{` + msgs + `,"chat_template_kwargs":[1]}`, 400, "chat_template_kwargs"},
		{"tokenize no input", "/tokenize", `{}`, 400, "prompt"},
		{"tokenize bad model", "/tokenize", `{"model":"x","prompt":"a"}`, 404, "model"},
		{"detokenize out of vocab", "/detokenize", `{"tokens":[1,100000]}`, 400, "tokens"},
		{"detokenize wrong type", "/detokenize", `{"tokens":"abc"}`, 400, "tokens"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := env.post(tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tc.status, body)
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    int     `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body is not JSON: %s", body)
			}
			if e.Error.Message == "" || e.Error.Type == "" || e.Error.Code != tc.status {
				t.Fatalf("incomplete error body: %s", body)
			}
			got := ""
			if e.Error.Param != nil {
				got = *e.Error.Param
			}
			if got != tc.param {
				t.Fatalf("param %q, want %q; body %s", got, tc.param, body)
			}
		})
	}
	if resp, _ := env.post(C, `{"prompt":"hi","max_tokens":2}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("server unusable after bad input: %d", resp.StatusCode)
	}
}
