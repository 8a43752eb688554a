package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fastDecodeSeeds are bodies the fast path takes or gives up on, for the
// table test and as the fuzz seeds.
var fastDecodeSeeds = []struct {
	name string
	body string
	fast string // which request types' fast path takes it: both, completions, chat or none
}{
	{"split benchmark", `{"model":"demo","prompt":"Once upon a time","max_tokens":16,"ignore_eos":true,"stream":true}`, "completions"},
	{"chat", `{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_completion_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`, "chat"},
	{"empty", `{}`, "both"},
	{"whitespace", " {\n\t\"model\" : \"m\" ,\r\n \"n\":1 }\n", "both"},
	{"numbers", `{"temperature":0.7,"top_p":1,"top_k":-1,"min_p":0e0,"seed":-0,"presence_penalty":-1.5E+2,"frequency_penalty":2e-3}`, "both"},
	{"nulls", `{"model":null,"max_tokens":null,"stop":null,"stream":null,"stream_options":null,"skip_special_tokens":null,"messages":null}`, "chat"},
	{"stream options", `{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`, "both"},
	{"raw values", `{"stop":["a","b\n"],"messages":[{"role":"user","content":"hi \u00e9"},null, 1 ],"tools":[],"tool_choice":"auto","guided_json":{"type":"object","properties":{"a":{"type":["string","null"]}}}}`, "chat"},
	{"prompt ids", `{"prompt":[[1,2],[3]],"stop":"x","best_of":1,"logprobs":2,"suffix":null}`, "completions"},
	{"pointers", `{"chat_template":"t","reasoning_effort":"low","guided_regex":"a+","guided_grammar":"g","logprobs":null,"top_logprobs":2,"add_generation_prompt":false,"continue_final_message":true,"include_reasoning":true,"parallel_tool_calls":true,"max_completion_tokens":3}`, "chat"},
	{"unknown key", `{"model":"m","foo":1}`, "none"},
	{"key in other case", `{"Model":"m"}`, "none"},
	{"key with escape", `{"mod\u0065l":"m"}`, "none"},
	{"non-ASCII key", `{"ſtream":true}`, "none"},
	{"duplicate key", `{"model":"a","model":"b"}`, "none"},
	{"string with escape", `{"model":"a\"b"}`, "none"},
	{"invalid UTF-8", "{\"model\":\"a\xffb\"}", "none"},
	{"wrong type", `{"max_tokens":"16"}`, "none"},
	{"float for int", `{"max_tokens":1.0}`, "none"},
	{"int out of range", `{"max_tokens":9223372036854775808}`, "none"},
	{"float out of range", `{"temperature":1e400}`, "none"},
	{"stream string", `{"stream":"true"}`, "none"},
	{"other field kind", `{"stop_token_ids":[1,2]}`, "none"},
	{"logit bias", `{"logit_bias":{"1":2}}`, "none"},
	{"stream options unknown", `{"stream_options":{"include_usage":true,"x":1}}`, "none"},
	{"syntax: trailing comma", `{"model":"m",}`, "none"},
	{"syntax: after object", `{"model":"m"} x`, "none"},
	{"syntax: leading zero", `{"n":01}`, "none"},
	{"syntax: bad escape in raw", `{"prompt":"\x"}`, "none"},
	{"syntax: bad literal", `{"stream":tru}`, "none"},
	{"syntax: unclosed", `{"prompt":[1,2`, "none"},
	{"syntax: control char", "{\"prompt\":\"a\tb\"}", "none"},
	{"deep", `{"prompt":` + deepArray(100) + `}`, "none"},
}

// deepArray is n nested arrays.
func deepArray(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

// TestFastDecode: the fast path takes the bodies it should and gives the
// same requests as json.Unmarshal; Decode's result is json.Unmarshal's
// either way.
func TestFastDecode(t *testing.T) {
	for _, tt := range fastDecodeSeeds {
		t.Run(tt.name, func(t *testing.T) {
			var c CompletionRequest
			if got, want := c.decodeFast([]byte(tt.body)), tt.fast == "both" || tt.fast == "completions"; got != want {
				t.Errorf("completions fast path took it: %v, want %v", got, want)
			}
			var ch ChatRequest
			if got, want := ch.decodeFast([]byte(tt.body)), tt.fast == "both" || tt.fast == "chat"; got != want {
				t.Errorf("chat fast path took it: %v, want %v", got, want)
			}
			checkFastDecode(t, []byte(tt.body))
		})
	}
}

// FuzzFastDecode checks the fast path against json.Unmarshal: whenever it
// takes a body, json.Unmarshal accepts it too and gives the same request.
func FuzzFastDecode(f *testing.F) {
	for _, tt := range fastDecodeSeeds {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastDecode(t, body)
	})
}

// checkFastDecode compares both request types' fast path with
// json.Unmarshal on body.
func checkFastDecode(t *testing.T, body []byte) {
	t.Helper()
	compare(t, body, func(b []byte, v *CompletionRequest) bool { return v.decodeFast(b) })
	compare(t, body, func(b []byte, v *ChatRequest) bool { return v.decodeFast(b) })
}

func compare[T any](t *testing.T, body []byte, fast func([]byte, *T) bool) {
	t.Helper()
	var got T
	if !fast(body, &got) {
		return
	}
	var want T
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("%T: fast path took %q, json.Unmarshal fails: %v", want, body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T of %q:\nfast path      %+v\njson.Unmarshal %+v", want, body, got, want)
	}
}

// TestFastDecodeAllocs: the split benchmark's body decodes with the
// allocations of its values only (the prompt's copy, max_tokens, model)
// and of the request itself (it escapes through Decode's any, as in the
// handlers).
func TestFastDecodeAllocs(t *testing.T) {
	body := []byte(`{"model":"demo","prompt":"Once upon a time","max_tokens":16,"ignore_eos":true,"stream":true}`)
	n := testing.AllocsPerRun(100, func() {
		var req CompletionRequest
		if e := Decode(body, &req); e != nil {
			t.Fatal(e)
		}
	})
	if n > 4 {
		t.Fatalf("%.0f allocations per decode, want ≤ 4", n)
	}
}

// fastKeys are the keys the fast path takes, for FuzzFastDecodeFields.
var fastKeys = []string{"model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "seed", "stop",
	"include_stop_str_in_output", "ignore_eos", "min_tokens", "presence_penalty", "frequency_penalty",
	"repetition_penalty", "echo", "stream", "stream_options", "skip_special_tokens", "user", "stream_interval",
	"priority", "request_id", "guided_json", "guided_regex", "guided_grammar", "prompt", "logprobs", "suffix",
	"best_of", "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
	"add_generation_prompt", "continue_final_message", "include_reasoning", "chat_template", "reasoning_effort"}

// FuzzFastDecodeFields is FuzzFastDecode on bodies of two known keys with
// fuzzed values, so that the setters' cases (numbers, strings, nulls,
// nested values) are reached far more often than from random bodies.
func FuzzFastDecodeFields(f *testing.F) {
	f.Add(uint8(0), []byte(`"demo"`), uint8(1), []byte(`16`))
	f.Add(uint8(2), []byte(`1e-3`), uint8(17), []byte(`{"include_usage":true}`))
	f.Add(uint8(30), []byte(`[{"role":"user","content":"x"}]`), uint8(16), []byte(`null`))
	f.Add(uint8(26), []byte(`[1,2]`), uint8(6), []byte(`-0`))
	f.Fuzz(func(t *testing.T, k1 uint8, v1 []byte, k2 uint8, v2 []byte) {
		body := []byte(`{"` + fastKeys[int(k1)%len(fastKeys)] + `":`)
		body = append(body, v1...)
		body = append(body, `,"`+fastKeys[int(k2)%len(fastKeys)]+`":`...)
		body = append(body, v2...)
		body = append(body, '}')
		checkFastDecode(t, body)
	})
}
