package server

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// TestEmptyPrompt: an empty prompt is refused only when it is empty after
// tokenization. With a tokenizer that adds BOS (llama2.c's tok512.bin, a
// real file) "" is the prompt [BOS], unconditional generation, as in
// llama2.c and vLLM; with one that adds nothing it is a 400 naming "prompt".
func TestEmptyPrompt(t *testing.T) {
	tok, err := tokenizer.Load("", testenv.SharedFile(t, "stories260K/tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	bos := tok.BOS()
	if bos < 0 {
		t.Fatal("tok512.bin has no BOS")
	}
	eng := newFakeEngine("abc", time.Millisecond)
	client := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
	srv := New(Config{ServedModelNames: []string{"m"}}, Deps{Engines: client, Tokenizer: tok, Chat: simpleChat{}})
	client.Start()
	t.Cleanup(client.Close)
	withBOS := &testEnv{t: t, eng: eng, client: client, srv: srv, http: newHTTPTest(t, srv)}
	noBOS := newTestEnv(t, Config{}, "abc") // byteTok adds nothing

	cases := []struct {
		name   string
		env    *testEnv
		path   string
		body   string
		status int
		// prompts are the prompts the engine must receive (status 200).
		prompts [][]int32
	}{
		{"string", withBOS, "/v1/completions", `{"prompt":"","max_tokens":3}`, 200, [][]int32{{bos}}},
		{"list with empty string", withBOS, "/v1/completions", `{"prompt":["","a"],"max_tokens":3}`, 200, [][]int32{{bos}, tok.Encode("a", true)}},
		{"token list", withBOS, "/v1/completions", `{"prompt":[` + itoa(int(bos)) + `],"max_tokens":3}`, 200, [][]int32{{bos}}},
		{"empty token list", withBOS, "/v1/completions", `{"prompt":[],"max_tokens":3}`, 400, nil},
		{"empty nested token list", withBOS, "/v1/completions", `{"prompt":[[]],"max_tokens":3}`, 400, nil},
		{"chat empty content", withBOS, "/v1/chat/completions", `{"messages":[{"role":"user","content":""}],"max_tokens":3}`, 200, [][]int32{tok.Encode("user: \nassistant: ", false)}},
		{"string, no BOS", noBOS, "/v1/completions", `{"prompt":"","max_tokens":3}`, 400, nil},
		{"list with empty string, no BOS", noBOS, "/v1/completions", `{"prompt":["a",""],"max_tokens":3}`, 400, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.env.eng.mu.Lock()
			before := len(tc.env.eng.added)
			tc.env.eng.mu.Unlock()
			resp, body := tc.env.post(tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status != 200 {
				var e struct {
					Error struct {
						Param   *string `json:"param"`
						Message string  `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Param == nil || *e.Error.Param != "prompt" || e.Error.Message == "" {
					t.Fatalf("error body %s, want an error naming param \"prompt\"", body)
				}
				return
			}
			var out struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			tc.env.eng.mu.Lock()
			added := tc.env.eng.added[before:]
			tc.env.eng.mu.Unlock()
			var got [][]int32
			total := 0
			for _, a := range added {
				got = append(got, a.PromptTokenIDs)
				total += len(a.PromptTokenIDs)
			}
			if len(got) != len(tc.prompts) || !slices.EqualFunc(got, tc.prompts, slices.Equal[[]int32]) {
				t.Errorf("engine got prompts %v, want %v", got, tc.prompts)
			}
			if out.Usage.PromptTokens != total {
				t.Errorf("usage.prompt_tokens %d, want %d", out.Usage.PromptTokens, total)
			}
		})
	}
}
