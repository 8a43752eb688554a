package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/webui"
)

func newTest(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.TokenInterval == 0 {
		cfg.TokenInterval = time.Millisecond
	}
	s := New(cfg)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

// events posts body and returns the stream's data payloads up to [DONE].
func events(t *testing.T, hs *httptest.Server, path, body string) (int, []string) {
	t.Helper()
	resp, err := hs.Client().Post(hs.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		} else if resp.StatusCode != http.StatusOK && sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return resp.StatusCode, out
}

type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			Reasoning string `json:"reasoning"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func parse(t *testing.T, data []string) []chunk {
	t.Helper()
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", data)
	}
	var out []chunk
	for _, d := range data[:len(data)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamInterval(t *testing.T) {
	_, hs := newTest(t, Config{})
	for _, tc := range []struct {
		interval, maxTokens, wantChunks int
	}{
		{1, 10, 10},
		{3, 10, 4}, // 1 at once, then 3+3+3
		{4, 10, 4}, // 1, 4, 4, then the last 1 with the finish
	} {
		body := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":` + itoa(tc.maxTokens) +
			`,"stream_interval":` + itoa(tc.interval) + `,"stream_options":{"include_usage":true}}`
		code, data := events(t, hs, "/v1/chat/completions", body)
		if code != 200 {
			t.Fatalf("status %d: %q", code, data)
		}
		cs := parse(t, data)
		usage := cs[len(cs)-1]
		if len(usage.Choices) != 0 || usage.Usage == nil || usage.Usage.CompletionTokens != tc.maxTokens {
			t.Fatalf("last chunk is not the usage chunk: %+v", usage)
		}
		cs = cs[:len(cs)-1]
		if len(cs) != tc.wantChunks {
			t.Errorf("interval %d: %d chunks, want %d", tc.interval, len(cs), tc.wantChunks)
		}
		if cs[0].Choices[0].Delta.Role != "assistant" {
			t.Errorf("first chunk lacks the role: %+v", cs[0])
		}
		var text strings.Builder
		for _, c := range cs {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if n := len(strings.Fields(text.String())); n != tc.maxTokens {
			t.Errorf("interval %d: %d words, want %d", tc.interval, n, tc.maxTokens)
		}
		if fr := cs[len(cs)-1].Choices[0].FinishReason; fr == nil || *fr != "length" {
			t.Errorf("finish reason %v, want length", fr)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestToolCallAndReasoning(t *testing.T) {
	_, hs := newTest(t, Config{})
	body := `{"messages":[{"role":"user","content":"think about the weather"}],"stream":true,
		"tools":[{"type":"function","function":{"name":"get_weather"}}]}`
	_, data := events(t, hs, "/v1/chat/completions", body)
	var reasoning, args strings.Builder
	name, fragments := "", 0
	var finish string
	for _, c := range parse(t, data) {
		d := c.Choices[0].Delta
		reasoning.WriteString(d.Reasoning)
		for _, tc := range d.ToolCalls {
			name += tc.Function.Name
			args.WriteString(tc.Function.Arguments)
			fragments++
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			finish = *fr
		}
	}
	if reasoning.Len() == 0 {
		t.Error("no reasoning deltas")
	}
	var parsed map[string]string
	if err := json.Unmarshal([]byte(args.String()), &parsed); err != nil || parsed["city"] != "Paris" {
		t.Errorf("arguments %q do not assemble into the call (%v)", args.String(), err)
	}
	if name != "get_weather" || fragments < 3 || finish != "tool_calls" {
		t.Errorf("name %q, %d fragments, finish %q", name, fragments, finish)
	}
}

func TestErrors(t *testing.T) {
	_, hs := newTest(t, Config{})
	_, data := events(t, hs, "/v1/completions", `{"prompt":"please fail","stream":true}`)
	cs := parse(t, data)
	last := cs[len(cs)-1]
	if last.Error == nil || last.Error.Message == "" || len(cs) < 2 || cs[0].Choices[0].Text == "" {
		t.Errorf("want text, then a mid-stream error event: %q", data)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"prompt":"x","stream":true,"temperature":9}`, "temperature"},
		{`{"prompt":"refuse","stream":true}`, "refuses"},
		{`{"prompt":"x","stream":true,"model":"other"}`, "does not exist"},
		{`{"prompt":`, "invalid JSON"},
	} {
		code, data := events(t, hs, "/v1/completions", tc.body)
		if code < 400 || len(data) != 1 || !strings.Contains(data[0], tc.want) || !strings.Contains(data[0], `"error"`) {
			t.Errorf("%s: %d %q, want an error mentioning %q", tc.body, code, data, tc.want)
		}
	}
}

func TestAPIKey(t *testing.T) {
	_, hs := newTest(t, Config{APIKey: "sekret"})
	resp, err := hs.Client().Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", hs.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer sekret")
	resp, err = hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with key: %d", resp.StatusCode)
	}
	resp, err = hs.Client().Get(hs.URL + "/ui/api/config")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]bool
	_ = json.NewDecoder(resp.Body).Decode(&cfg)
	resp.Body.Close()
	if !cfg["api_key_required"] {
		t.Errorf("config %v does not ask for the key", cfg)
	}
}

// TestAbortFreesTheSlot checks a disconnect ends the request and shows in the stats.
func TestAbortFreesTheSlot(t *testing.T) {
	s, hs := newTest(t, Config{TokenInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"go on"}],"stream":true,"max_tokens":100000}`))
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if got := running(s.Stats()); got != 1 {
		t.Fatalf("running while streaming = %d, want 1", got)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for running(s.Stats()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("running = %d 5 s after the disconnect", running(s.Stats()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := s.Stats()
	if st.Frontend.StreamsOpen != 0 || st.Frontend.RequestsFinished != 1 || st.Engines[0].GeneratedTokens == 0 {
		t.Errorf("stats after the abort: %+v", st)
	}
}

func running(st webui.Stats) int64 {
	var n int64
	for _, e := range st.Engines {
		n += e.Running
	}
	return n
}
