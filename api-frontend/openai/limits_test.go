package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bigStops returns a JSON list of n distinct stop strings of size bytes each.
func bigStops(n, size int) string {
	list := make([]string, n)
	for i := range list {
		s := fmt.Sprintf("s%d-", i)
		list[i] = s + strings.Repeat("x", max(0, size-len(s)))
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// bias returns a logit_bias object with the given keys, each biased by 1.
func bias(keys ...string) string {
	m := map[string]float64{}
	for _, k := range keys {
		m[k] = 1
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func manyBias(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
	}
	return bias(keys...)
}

func wideSchema(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"p%d":{"type":"string"}`, i)
	}
	sb.WriteString(`}}`)
	return sb.String()
}

func manyPrompts(n int) string {
	list := make([]string, n)
	for i := range list {
		list[i] = "p"
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// TestRequestLimits checks every per-request cost cap of issue 21: a breach
// is a 400 naming the field and the limit; a request at the limit passes.
func TestRequestLimits(t *testing.T) {
	lim := Limits{VocabSize: 1 << 20}
	small := Limits{VocabSize: 1 << 20, RequestLimits: RequestLimits{MaxStopStrings: 2, MaxStopStrBytes: 10, MaxLogitBias: 3, MaxSeqsPerRequest: 8, MaxGrammarBytes: 1 << 20}}
	cases := []struct {
		name  string
		lim   Limits
		body  string
		param string // "" when the request is valid
		msg   string // part of the message
	}{
		{"stops at default count", lim, `{"prompt":"x","stop":` + bigStops(DefaultMaxStopStrings, 8) + `}`, "", ""},
		{"100k stop strings", lim, `{"prompt":"x","n":64,"stop":` + bigStops(100000, 8) + `}`, "stop", "more than the limit of 64 (--max-stop-strings)"},
		{"stop bytes over default", lim, `{"prompt":"x","stop":` + bigStops(2, DefaultMaxStopStrBytes) + `}`, "stop", "--max-stop-str-bytes"},
		{"one long stop string", lim, `{"prompt":"x","stop":"` + strings.Repeat("y", DefaultMaxStopStrBytes+1) + `"}`, "stop", "--max-stop-str-bytes"},
		{"stop count flag", small, `{"prompt":"x","stop":["a","b","c"]}`, "stop", "limit of 2 (--max-stop-strings)"},
		{"stop bytes flag", small, `{"prompt":"x","stop":["abcdef","ghijk"]}`, "stop", "limit of 10 (--max-stop-str-bytes)"},
		{"stop bytes at flag", small, `{"prompt":"x","stop":["abcde","fghij"]}`, "", ""},
		{"logit_bias 300", lim, `{"prompt":"x","logit_bias":` + manyBias(300) + `}`, "", ""},
		{"logit_bias 301", lim, `{"prompt":"x","logit_bias":` + manyBias(301) + `}`, "logit_bias", "limit of 300 (--max-logit-bias)"},
		{"logit_bias 160k", lim, `{"prompt":"x","logit_bias":` + manyBias(160000) + `}`, "logit_bias", "--max-logit-bias"},
		{"logit_bias flag", small, `{"prompt":"x","logit_bias":` + manyBias(4) + `}`, "logit_bias", "limit of 3"},
		{"logit_bias leading zeros", lim, `{"prompt":"x","logit_bias":` + bias("0007") + `}`, "logit_bias", `"0007" is not a canonical token id (write 7)`},
		{"logit_bias plus sign", lim, `{"prompt":"x","logit_bias":` + bias("+7") + `}`, "logit_bias", `"+7" is not a canonical token id`},
		{"logit_bias minus zero", lim, `{"prompt":"x","logit_bias":` + bias("-0") + `}`, "logit_bias", `not a canonical token id`},
		{"logit_bias zero", lim, `{"prompt":"x","logit_bias":` + bias("0", "7", "10") + `}`, "", ""},
		{"fan-out 10000 prompts × n 128", lim, `{"prompt":` + manyPrompts(10000) + `,"n":128,"max_tokens":1}`, "n", "10000 prompts × n 128 = 1280000 sequences, more than the limit of 256 (--max-seqs-per-request)"},
		{"fan-out at default", lim, `{"prompt":` + manyPrompts(2) + `,"n":128}`, "", ""},
		{"fan-out flag", small, `{"prompt":` + manyPrompts(3) + `,"n":3}`, "n", "limit of 8 (--max-seqs-per-request)"},
		{"regex blow-up", lim, `{"prompt":"x","guided_regex":"\\p{L}{1000}"}`, "guided_regex", "too complex"},
		{"schema pattern blow-up", lim, `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^\\p{L}{1000}$"}},"required":["a"]}}}}`, "response_format", "too complex"},
		{"10 000-property schema", lim, `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + wideSchema(10000) + `}}}`, "response_format", "grammar too large"},
		{"600-property schema", lim, `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + wideSchema(600) + `}}}`, "", ""},
		{"600-property schema over flag", small, `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + wideSchema(600) + `}}}`, "response_format", "limit of 1 MiB (--max-grammar-bytes)"},
		{"regex fine", lim, `{"prompt":"x","guided_regex":"\\p{L}{10}"}`, "", ""},
		{"n over flag", small, `{"prompt":"x","n":9}`, "n", "between 1 and 8 (--max-seqs-per-request)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r CompletionRequest
			if e := Decode([]byte(tc.body), &r); e != nil {
				t.Fatal(e)
			}
			c, e := r.Validate(tc.lim)
			if tc.param == "" {
				if e != nil {
					t.Fatalf("want valid, got %v", e)
				}
				if len(r.LogitBias) > 0 && len(c.Params.LogitBias) != len(r.LogitBias) {
					t.Fatalf("logit bias %v", c.Params.LogitBias)
				}
				for i := 1; i < len(c.Params.LogitBias); i++ {
					if c.Params.LogitBias[i-1].Token >= c.Params.LogitBias[i].Token {
						t.Fatalf("logit bias not sorted: %v", c.Params.LogitBias)
					}
				}
				return
			}
			if e == nil {
				t.Fatal("want an error, got none")
			}
			if e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %d param %q %q; want 400 param %q containing %q", e.Status, e.Param, e.Message, tc.param, tc.msg)
			}
			if len(e.Message) > 300 {
				t.Fatalf("message is %d bytes long", len(e.Message))
			}
		})
	}
}

// BenchmarkLogitBiasValidate validates a request with the most logit_bias
// entries allowed (sorted in O(n log n)).
//
//	go test -run '^$' -bench LogitBiasValidate ./api-frontend/openai
func BenchmarkLogitBiasValidate(b *testing.B) {
	body := []byte(`{"prompt":"x","logit_bias":` + manyBias(DefaultMaxLogitBias) + `}`)
	lim := Limits{VocabSize: 1 << 20}
	for b.Loop() {
		var r CompletionRequest
		if e := Decode(body, &r); e != nil {
			b.Fatal(e)
		}
		if _, e := r.Validate(lim); e != nil {
			b.Fatal(e)
		}
	}
}

// TestToolGrammarLimit: the grammar of tool_choice required is bounded by
// --max-grammar-bytes like response_format: over the flag it is a 400 on
// tools naming the limit; at the default it passes.
func TestToolGrammarLimit(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":` + wideSchema(600) + `}}],"tool_choice":"required"}`
	for _, tc := range []struct {
		name string
		lim  Limits
		msg  string // "" when valid
	}{
		{"default", Limits{VocabSize: 1 << 20}, ""},
		{"1 MiB flag", Limits{VocabSize: 1 << 20, RequestLimits: RequestLimits{MaxGrammarBytes: 1 << 20}}, "limit of 1 MiB (--max-grammar-bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if e := Decode([]byte(body), &r); e != nil {
				t.Fatal(e)
			}
			_, e := r.Validate(tc.lim, ToolConfig{})
			if tc.msg == "" {
				if e != nil {
					t.Fatalf("want valid, got %v", e)
				}
				return
			}
			if e == nil || e.Status != 400 || e.Param != "tools" || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %+v; want 400 on tools containing %q", e, tc.msg)
			}
		})
	}
}
