package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
)

type errBody struct {
	Error struct {
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// TestTokenizeLimits: /tokenize and /detokenize have their own body limit
// (413) and /tokenize a token-count limit (400 naming the field and flag).
func TestTokenizeLimits(t *testing.T) {
	env := newTestEnv(t, Config{MaxTokenizeBodyBytes: 1000, RequestLimits: openai.RequestLimits{MaxTokenizeTokens: 100}}, "abc")
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		param  string
		msg    string
	}{
		{"at token limit", "/tokenize", `{"prompt":"` + strings.Repeat("a", 100) + `","return_token_strs":true}`, 200, "", ""},
		{"over token limit", "/tokenize", `{"prompt":"` + strings.Repeat("a", 101) + `"}`, 400, "prompt", "101 tokens, more than the limit of 100 (--max-tokenize-tokens)"},
		{"messages over token limit", "/tokenize", `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 100) + `"}]}`, 400, "messages", "--max-tokenize-tokens"},
		{"body over limit", "/tokenize", `{"prompt":"` + strings.Repeat("a", 1000) + `"}`, 413, "", "larger than 1000 bytes"},
		{"detokenize body over limit", "/detokenize", `{"tokens":[` + strings.Repeat("1,", 600) + `1]}`, 413, "", "larger than 1000 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, b := env.post(tc.path, tc.body)
			if r.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, tc.status, b)
			}
			if tc.status == 200 {
				return
			}
			var e errBody
			if err := json.Unmarshal(b, &e); err != nil || !strings.Contains(e.Error.Message, tc.msg) {
				t.Fatalf("error %s, want message containing %q", b, tc.msg)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Fatalf("error %s, want param %q", b, tc.param)
			}
		})
	}
}

// TestQueueLimitCountsSequences: --max-queued-requests counts sequences
// (prompts × n), so a fan-out request cannot slip past it.
func TestQueueLimitCountsSequences(t *testing.T) {
	env := newTestEnv(t, Config{MaxQueuedRequests: 4}, "abc")
	if r, b := env.post("/v1/completions", `{"prompt":["a","b"],"n":2,"max_tokens":2}`); r.StatusCode != 200 {
		t.Fatalf("4 sequences with an empty queue: %d %s", r.StatusCode, b)
	}
	if r, b := env.post("/v1/completions", `{"prompt":"x","n":5,"max_tokens":2}`); r.StatusCode != 400 || !strings.Contains(string(b), "--max-queued-requests (4)") {
		t.Fatalf("5 sequences over a limit of 4: %d %s", r.StatusCode, b)
	}
	env.srv.waiting.Add(2) // two sequences waiting for their first token
	if r, b := env.post("/v1/completions", `{"prompt":["a","b","c"],"max_tokens":2}`); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("2 waiting + 3 sequences: %d %s", r.StatusCode, b)
	}
	if r, b := env.post("/v1/completions", `{"prompt":"x","n":2,"max_tokens":2}`); r.StatusCode != 200 {
		t.Fatalf("2 waiting + 2 sequences: %d %s", r.StatusCode, b)
	}
	env.srv.waiting.Add(-2)
	if w := env.srv.waiting.Load(); w != 0 {
		t.Fatalf("waiting %d after all requests finished", w)
	}
}
