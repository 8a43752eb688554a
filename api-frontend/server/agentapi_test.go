package server

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/respstore"
	"github.com/sluice-llm/sluice/api-frontend/seal"
	"github.com/sluice-llm/sluice/text/chattemplate"
)

var updateGolden = flag.Bool("update-agent", false, "rewrite the agent API golden prompts")

// qwen3Template is the real Qwen3 chat template from ../shared (tools,
// tool results and reasoning_content); tests skip without it.
func qwen3Template(t *testing.T) *TemplateRenderer {
	t.Helper()
	b, err := os.ReadFile("../../../shared/models/tokenizers/qwen3/tokenizer_config.json")
	if err != nil {
		t.Skipf("../shared/models/tokenizers/qwen3 is absent (%v): skipping the golden prompt test", err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.ChatTemplate == "" {
		t.Fatalf("qwen3 tokenizer_config.json: %v", err)
	}
	r, err := NewTemplateRenderer(map[string]string{chattemplate.DefaultName: cfg.ChatTemplate}, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// agentEnv is a server over the fake engine with a response store and a
// sealer; chat renders prompts (nil: the stand-in template).
func agentEnv(t *testing.T, chat ChatRenderer, maxModelLen int) *testEnv {
	t.Helper()
	env := newTestEnv(t, Config{MaxModelLen: maxModelLen, EnableAutoToolChoice: true, ToolCallParser: "hermes"}, "ok")
	env.eng.mu.Lock()
	env.eng.eos = true // "ok" then EOS
	env.eng.mu.Unlock()
	if chat != nil {
		env.srv.deps.Chat = chat
	}
	st, err := respstore.Open(respstore.Options{Path: filepath.Join(t.TempDir(), "r.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sl, err := seal.New(make([]byte, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	env.srv.deps.Store, env.srv.deps.Sealer = st, sl
	return env
}

// lastPrompt is the prompt text of the engine's last request (byteTok:
// one token per byte).
func (e *testEnv) lastPrompt() string {
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	ids := e.eng.added[len(e.eng.added)-1].PromptTokenIDs
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

// TestAgentPromptsGolden renders multi-turn conversations of both APIs
// (function_call / function_call_output with reasoning; tool_use /
// tool_result with is_error and thinking) through the real Qwen3 template
// and compares the prompts the engine receives with testdata goldens.
func TestAgentPromptsGolden(t *testing.T) {
	env := agentEnv(t, qwen3Template(t), 8192)
	sealed := env.srv.deps.Sealer.Seal("I should call the weather tool.")
	tests := []struct {
		name, path, body string
	}{
		{"responses", "/v1/responses", `{"model":"m","instructions":"You are terse.","max_output_tokens":4,
			"tools":[{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
			         {"type":"web_search"},
			         {"type":"namespace","name":"fs","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]}],
			"include":["reasoning.encrypted_content"],"store":false,"prompt_cache_key":"k","client_metadata":{"a":"b"},"reasoning":{"effort":"low","summary":"auto"},
			"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},
			         {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"` + sealed + `"},
			         {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			         {"type":"function_call_output","call_id":"call_1","output":"{\"temp_c\":21}"},
			         {"role":"assistant","content":[{"type":"output_text","text":"21°C."}]},
			         {"role":"user","content":"Thanks!"}]}`},
		{"messages", "/v1/messages?beta=true", `{"model":"claude-x","max_tokens":32000,
			"system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],
			"metadata":{"user_id":"u"},"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"context_management":{"edits":[]},
			"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}},"cache_control":{"type":"ephemeral"}},
			         {"type":"web_search_20250305","name":"web_search"}],
			"messages":[{"role":"user","content":"Weather in Paris?"},
			            {"role":"assistant","content":[{"type":"thinking","thinking":"I should call the weather tool.","signature":"x"},
			                                           {"type":"text","text":"Checking."},
			                                           {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			            {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"timeout"}]},
			                                      {"type":"text","text":"Try again?"}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := env.post(tc.path, tc.body, "anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			got := env.lastPrompt()
			path := filepath.Join("testdata", "agent_prompt_"+tc.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-agent)", err)
			}
			if got != string(want) {
				t.Errorf("prompt differs:\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

// TestResponsesStoreFlow: store:false keeps nothing; a stored response is
// readable, continues through previous_response_id, and is deleted.
func TestResponsesStoreFlow(t *testing.T) {
	env := agentEnv(t, nil, 512)
	get := func(id string) int {
		req, _ := http.NewRequest(http.MethodGet, env.http.URL+"/v1/responses/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var r struct {
		ID string `json:"id"`
	}
	_, body := env.post("/v1/responses", `{"input":"hello","store":false,"max_output_tokens":2}`)
	if err := json.Unmarshal(body, &r); err != nil || get(r.ID) != http.StatusNotFound {
		t.Fatalf("store:false response %s readable (%s)", r.ID, body)
	}
	_, body = env.post("/v1/responses", `{"input":"first turn","max_output_tokens":2}`)
	_ = json.Unmarshal(body, &r)
	if get(r.ID) != http.StatusOK {
		t.Fatalf("stored response %s not readable", r.ID)
	}
	resp, body := env.post("/v1/responses", `{"input":"second turn","previous_response_id":"`+r.ID+`","max_output_tokens":2}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(env.lastPrompt(), "first turn") || !strings.Contains(env.lastPrompt(), "second turn") {
		t.Fatalf("continuation: %d %s; prompt %q", resp.StatusCode, body, env.lastPrompt())
	}
	req, _ := http.NewRequest(http.MethodDelete, env.http.URL+"/v1/responses/"+r.ID, nil)
	dr, err := http.DefaultClient.Do(req)
	if err != nil || dr.StatusCode != http.StatusOK {
		t.Fatalf("delete: %v %v", err, dr)
	}
	dr.Body.Close()
	if get(r.ID) != http.StatusNotFound {
		t.Fatal("deleted response still readable")
	}
	if n, err := env.srv.deps.Store.Get(context.Background(), r.ID); err == nil {
		t.Fatalf("store still holds %v", n)
	}
}

// FuzzAgentAPIs posts arbitrary bodies to both new surfaces (and
// count_tokens): never a 5xx, and every error is in the surface's own shape.
// body is the request body; which picks the route.
func FuzzAgentAPIs(f *testing.F) {
	seeds := []string{
		`{"input":"hi","max_output_tokens":3}`,
		`{"input":[{"type":"function_call_output","call_id":"x","output":"y"}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}],"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r","is_error":true}]}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"}}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"x"}]}],"thinking":{"type":"enabled","budget_tokens":10}}`,
		`{"text":{"format":{"type":"json_schema","schema":{"type":"object"}}},"input":"x"}`,
		`{"input":[{"type":"reasoning","encrypted_content":"czE"}]}`,
		`nul`, `{}`, `{"input":null}`, `{"messages":[null],"max_tokens":1}`,
	}
	for i, s := range seeds {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		// A short context bounds requests that ignore EOS (the fake
		// engine makes one token per millisecond).
		env := agentEnv(t, nil, 300)
		path := []string{"/v1/responses", "/v1/messages", "/v1/messages/count_tokens"}[int(which)%3]
		resp, b := env.post(path, body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, resp.StatusCode, b)
		}
		if resp.StatusCode < 400 {
			return
		}
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s: error body %s", path, b)
		}
		if strings.HasPrefix(path, "/v1/messages") != (e.Type == "error") {
			t.Fatalf("%s: error in the wrong shape: %s", path, b)
		}
	})
}

// TestAPIRequestMetrics: /metrics counts requests per API surface.
func TestAPIRequestMetrics(t *testing.T) {
	env := agentEnv(t, nil, 512)
	env.post("/v1/responses", `{"input":"hi","max_output_tokens":2}`)
	env.post("/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	env.post("/v1/messages", `{"max_tokens":0,"messages":[]}`)
	env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	resp, err := http.Get(env.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`sluice_frontend_api_requests_total{api="responses"} 1`,
		`sluice_frontend_api_requests_total{api="messages"} 2`,
		`sluice_frontend_api_requests_total{api="chat"} 1`,
		`sluice_frontend_api_requests_total{api="completions"} 0`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestMessagesPingDuringPrefill: a Messages stream whose first token takes
// longer than pingEvery gets message_start and ping events first, then its
// content, with message_start sent once.
func TestMessagesPingDuringPrefill(t *testing.T) {
	eng := newFakeEngine("ok", 2500*time.Millisecond) // the first output comes after 2.5 s
	client := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
	srv := New(Config{ServedModelNames: []string{"m"}, MaxModelLen: 512}, Deps{Engines: client, Tokenizer: byteTok{}, Chat: simpleChat{}})
	client.Start()
	t.Cleanup(client.Close)
	env := &testEnv{t: t, eng: eng, client: client, srv: srv, http: newHTTPTest(t, srv)}
	resp, body := env.post("/v1/messages", `{"max_tokens":1,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var types []string
	for _, line := range strings.Split(string(body), "\n") {
		if typ, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, typ)
		}
	}
	got := strings.Join(types, " ")
	if !strings.HasPrefix(got, "message_start ping ping") || strings.Count(got, "message_start") != 1 ||
		!strings.HasSuffix(got, "content_block_start content_block_delta content_block_stop message_delta message_stop") {
		t.Fatalf("events: %s", got)
	}
}
