package e2etest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

type streamChunk struct {
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// rawStream posts body and returns the SSE payloads.
func rawStream(t *testing.T, base, path, body string) []string {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return sse(t, bufio.NewReader(resp.Body))
}

// collect concatenates the text of completion chunks and reads the usage.
func collect(t *testing.T, evs []string) (text string, chunks, completionTokens int, finish string, stop string) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", evs)
	}
	for _, e := range evs[:len(evs)-1] {
		var c streamChunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", e, err)
		}
		if c.Error != nil {
			t.Fatalf("error in stream: %s", c.Error.Message)
		}
		if c.Usage != nil && len(c.Choices) == 0 {
			completionTokens = c.Usage.CompletionTokens
			continue
		}
		for _, ch := range c.Choices {
			chunks++
			text += ch.Text
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				finish, stop = *ch.FinishReason, string(ch.StopReason)
			}
		}
	}
	return
}

func TestSDKAndIntervals(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "1")
	base, _ := startFrontend(t, addr)
	base10, _ := startFrontend(t, addr, "--stream-interval", "10")
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"))
	ctx := context.Background()

	t.Run("completions", func(t *testing.T) {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     "demo",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello there")},
			MaxTokens: openai.Int(8),
			N:         openai.Int(2),
			Seed:      openai.Int(3),
			Logprobs:  openai.Int(2),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 2 || c.Usage.CompletionTokens != 16 || c.Choices[0].FinishReason != "length" {
			t.Fatalf("unexpected completion %+v", c)
		}
		if len(c.Choices[0].Logprobs.Tokens) != 8 || len(c.Choices[0].Logprobs.TopLogprobs) != 8 || len(c.Choices[0].Logprobs.TextOffset) != 8 {
			t.Fatalf("logprobs %+v", c.Choices[0].Logprobs)
		}
	})
	t.Run("chat stream", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "demo",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something")},
			MaxTokens:     openai.Int(12),
			Logprobs:      openai.Bool(true),
			TopLogprobs:   openai.Int(2),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		n := 0
		for s.Next() {
			ch := s.Current()
			acc.AddChunk(ch)
			if n == 0 && (len(ch.Choices) != 1 || ch.Choices[0].Delta.Role != "assistant") {
				t.Fatalf("first chunk %+v", ch)
			}
			n++
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.CompletionTokens != 12 || acc.Choices[0].FinishReason != "length" || acc.Choices[0].Message.Content == "" {
			t.Fatalf("accumulated %+v", acc.ChatCompletion)
		}
	})
	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     "demo",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
			MaxTokens: openai.Int(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Role != "assistant" || c.Usage.CompletionTokens != 4 {
			t.Fatalf("chat %+v", c)
		}
	})
	t.Run("intervals", func(t *testing.T) {
		var ref string
		for _, tc := range []struct {
			base string
			iv   string
		}{{base, "1"}, {base, "3"}, {base, "10"}, {base10, ""}} {
			body := `{"model":"demo","prompt":"interval test","max_tokens":37,"seed":11,"stream":true,"stream_options":{"include_usage":true}`
			if tc.iv != "" {
				body += `,"stream_interval":` + tc.iv
			}
			body += "}"
			text, chunks, n, finish, _ := collect(t, rawStream(t, tc.base, "/v1/completions", body))
			if n != 37 || finish != "length" {
				t.Fatalf("interval %q: %d tokens, finish %q", tc.iv, n, finish)
			}
			if ref == "" {
				ref = text
			} else if text != ref {
				t.Fatalf("interval %q: text %q differs from interval 1's %q", tc.iv, text, ref)
			}
			if tc.iv == "10" || tc.iv == "" {
				if chunks > 6 {
					t.Fatalf("interval 10: %d chunks for 37 tokens", chunks)
				}
			}
		}
	})
}

func TestStopStringScript(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(script, []byte(`{"match":"STOPTEST","output":"alpha beta gamma delta epsilon"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-script", script, "--sim-step-ms", "1")
	base, _ := startFrontend(t, addr)
	for _, iv := range []string{"1", "4"} {
		evs := rawStream(t, base, "/v1/completions", `{"prompt":"STOPTEST","max_tokens":50,"stream":true,"stop":["a gam","zzz"],"stream_interval":`+iv+`}`)
		text, _, _, finish, stop := collect(t, evs)
		if text != "alpha bet" || finish != "stop" || stop != `"a gam"` {
			t.Fatalf("interval %s: text %q finish %q stop %s", iv, text, finish, stop)
		}
	}
	evs := rawStream(t, base, "/v1/completions", `{"prompt":"STOPTEST","max_tokens":50,"stream":true,"stop":"a gam","include_stop_str_in_output":true}`)
	if text, _, _, _, _ := collect(t, evs); text != "alpha beta gam" {
		t.Fatalf("include_stop_str_in_output: %q", text)
	}
	evs = rawStream(t, base, "/v1/completions", `{"prompt":"STOPTEST","max_tokens":50,"stream":true}`)
	if text, _, _, finish, _ := collect(t, evs); text != "alpha beta gamma delta epsilon" || finish != "stop" {
		t.Fatalf("scripted output: %q %q", text, finish)
	}
}

// engineStats asks the engine for its scheduler stats as another frontend.
func engineStats(t *testing.T, conn *zmqtransport.EngineConn) ipc.SchedulerStats {
	t.Helper()
	r, err := conn.Call("stats", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st ipc.SchedulerStats
	if err := msgpack.Unmarshal(r.Result, &st); err != nil {
		t.Fatalf("decode stats: %v", err)
	}
	return st
}

func TestDisconnectFreesKV(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "5")
	base, _ := startFrontend(t, addr)
	conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: "e2e-observer"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := conn.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("observer connection not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, stream := range []string{"true", "false"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(`{"prompt":"a long one","max_tokens":1500,"stream":`+stream+`,"ignore_eos":true}`))
		go func() {
			// Disconnect once the engine runs the request and holds its KV
			// (polled: a fixed 300 ms sleep failed whenever the request took
			// longer to reach the engine on a loaded machine).
			defer cancel()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st := engineStats(t, conn)
				if st.Running == 1 && st.KVUsage > 0 {
					return
				}
				if st.Running > 1 || time.Now().After(deadline) {
					t.Errorf("stream=%s: before disconnect the engine runs %d requests, kv %.4f", stream, st.Running, st.KVUsage)
					return
				}
			}
		}()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			st := engineStats(t, conn)
			if st.Running == 0 && st.Waiting == 0 && st.KVUsage == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream=%s: engine still busy after disconnect: %+v", stream, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestEngineKilledAndRestarted(t *testing.T) {
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "5")
	// Liveness 2 s (default 3 s): the stream must end within 3 s of the kill.
	base, _ := startFrontend(t, addr, "--stream-interval", "4", "--engine-liveness-timeout", "2s")
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":1000,"stream":true,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	eng.Kill()
	evs := sse(t, br)
	took := time.Since(killed)
	if took > 3*time.Second {
		t.Fatalf("stream ended %s after the engine died", took)
	}
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], `"error"`) {
		t.Fatalf("want tokens, then an error event, then [DONE]; got %q", evs)
	}
	waitHealth(t, base, http.StatusServiceUnavailable, 2*time.Second)
	startEngine(t, addr, "--sim-step-ms", "1")
	waitHealth(t, base, http.StatusOK, 30*time.Second)
	evs = rawStream(t, base, "/v1/completions", `{"prompt":"x","max_tokens":5,"stream":true}`)
	if text, _, _, finish, _ := collect(t, evs); finish != "length" || text == "" {
		t.Fatalf("after restart: %q %q", text, finish)
	}
	fmt.Fprintf(os.Stderr, "engine death noticed and stream ended in %s\n", took)
}

// TestGracefulShutdown sends SIGTERM to a frontend with an open stream: it
// stops accepting, lets the stream run for --shutdown-timeout, then ends it
// with an error event and [DONE], and exits.
func TestGracefulShutdown(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "5")
	base, fe := startFrontend(t, addr, "--shutdown-timeout", "700ms")
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":1500,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := fe.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /health turns 503 once the frontend has taken the signal (polled,
	// not after a fixed 200 ms: signal delivery can lag on a loaded
	// machine); an error means the listener is already closed.
	for deadline := time.Now().Add(500 * time.Millisecond); ; time.Sleep(10 * time.Millisecond) {
		r, err := http.Get(base + "/health")
		if err != nil {
			break
		}
		r.Body.Close()
		if r.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health %d 500 ms after SIGTERM, want 503 while draining", r.StatusCode)
		}
	}
	evs := sse(t, br)
	took := time.Since(start)
	if took < 600*time.Millisecond || took > 5*time.Second {
		t.Fatalf("stream ended %s after SIGTERM, want about the 700ms shutdown timeout", took)
	}
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], "shutting down") {
		t.Fatalf("want tokens, error, [DONE]; got the tail %q", evs[max(0, len(evs)-3):])
	}
	select {
	case <-fe.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("frontend did not exit after SIGTERM")
	}
}

// TestSpawnEngine runs api-frontend alone: it starts engine-core itself
// (passing the engine flags through), serves, and stops the engine on exit.
func TestSpawnEngine(t *testing.T) {
	port := freePort(t)
	fe := start(t, "api-frontend", "--model", "demo", "--executor", "sim", "--sim-step-ms", "1", "--max-num-seqs", "8",
		"--host", "127.0.0.1", "--port", fmt.Sprint(port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(t, base, http.StatusOK, 60*time.Second)
	evs := rawStream(t, base, "/v1/completions", `{"prompt":"spawned","max_tokens":4,"stream":true}`)
	if _, _, _, finish, _ := collect(t, evs); finish != "length" {
		t.Fatalf("finish %q", finish)
	}
	m := regexp.MustCompile(`spawned engine-core\s+\{"pid": (\d+)`).FindStringSubmatch(fe.Output())
	if m == nil {
		t.Fatalf("no spawn log line in:\n%s", fe.Output())
	}
	enginePID, _ := strconv.Atoi(m[1])
	if err := fe.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fe.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("frontend did not exit")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", enginePID)); err == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", enginePID)); !strings.Contains(string(st), ") Z ") {
			t.Fatalf("engine-core %d still running after the frontend exited", enginePID)
		}
	}
}
