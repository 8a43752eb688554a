package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// parseStream checks the SSE framing and returns the chunks before [DONE].
func parseStream(t *testing.T, body []byte) []chunk {
	t.Helper()
	evs := sseEvents(t, body)
	if len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", body)
	}
	var out []chunk
	for _, e := range evs[:len(evs)-1] {
		if e == "[DONE]" {
			t.Fatalf("[DONE] before the end: %q", body)
		}
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		if !strings.Contains(e, `"finish_reason":`) && c.Error == nil && len(c.Choices) > 0 {
			t.Fatalf("chunk without finish_reason field: %s", e)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamIntervalsSameText(t *testing.T) {
	const script = "The quick brown fox jumps over the lazy dog."
	env := newTestEnv(t, Config{}, script)
	for _, iv := range []int{1, 3, 10} {
		body := `{"prompt":"hi","max_tokens":40,"stream":true,"stream_interval":` + itoa(iv) + `,"stream_options":{"include_usage":true}}`
		resp, raw := env.post("/v1/completions", body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("interval %d: status %d %s", iv, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		chunks := parseStream(t, raw)
		var text strings.Builder
		nChoiceChunks := 0
		for i, c := range chunks {
			if len(c.Choices) == 0 {
				if i != len(chunks)-1 || c.Usage == nil {
					t.Fatalf("interval %d: usage chunk must be last", iv)
				}
				continue
			}
			nChoiceChunks++
			text.WriteString(c.Choices[0].Text)
		}
		if got, want := text.String(), script[:40]; got != want {
			t.Fatalf("interval %d: text %q, want %q", iv, got, want)
		}
		u := chunks[len(chunks)-1].Usage
		if u == nil || u.CompletionTokens != 40 || u.PromptTokens != 2 || u.TotalTokens != 42 || u.PromptTokensDetails == nil {
			t.Fatalf("interval %d: usage %+v", iv, u)
		}
		last := chunks[len(chunks)-2].Choices[0]
		if last.FinishReason == nil || *last.FinishReason != "length" {
			t.Fatalf("interval %d: last finish_reason %v", iv, last.FinishReason)
		}
		// first token alone, then chunks of >= iv tokens (the last may be shorter)
		maxChunks := 1 + (40-1+iv-1)/iv
		if nChoiceChunks > maxChunks+1 {
			t.Fatalf("interval %d: %d chunks, want at most %d", iv, nChoiceChunks, maxChunks+1)
		}
		if len(chunks[0].Choices[0].Text) != 1 {
			t.Fatalf("interval %d: first chunk %q is not the first token alone", iv, chunks[0].Choices[0].Text)
		}
	}
}

func TestChatStreamShape(t *testing.T) {
	env := newTestEnv(t, Config{}, "Hi there")
	resp, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	chunks := parseStream(t, raw)
	first := chunks[0].Choices[0]
	if first.Delta == nil || first.Delta.Role == nil || *first.Delta.Role != "assistant" || first.Delta.Content == nil || *first.Delta.Content != "H" {
		t.Fatalf("first chunk must carry the role and the first token: %s", raw)
	}
	var text string
	for i, c := range chunks {
		if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Fatalf("chunk %d: object %q id %q", i, c.Object, c.ID)
		}
		if c.Usage == nil {
			t.Fatalf("chunk %d has no usage with continuous_usage_stats", i)
		}
		if len(c.Choices) == 1 {
			if i > 0 && c.Choices[0].Delta.Role != nil {
				t.Fatalf("role repeated in chunk %d", i)
			}
			if c.Choices[0].Delta.Content != nil {
				text += *c.Choices[0].Delta.Content
			}
		}
	}
	if text != "Hi th" {
		t.Fatalf("text %q", text)
	}
	if !strings.Contains(string(raw), `"logprobs":null,"finish_reason":null`) {
		t.Fatalf("null fields must be written as null: %s", raw)
	}
	if !strings.Contains(string(raw), `"finish_reason":"length","stop_reason":null`) {
		t.Fatalf("final chunk lacks finish_reason/stop_reason: %s", raw)
	}
}

func TestStopStringAcrossTokens(t *testing.T) {
	env := newTestEnv(t, Config{}, "hello world. The end")
	for _, stream := range []bool{true, false} {
		body := `{"prompt":"x","max_tokens":30,"stop":["ld. T"],"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp, raw := env.post("/v1/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, raw)
		}
		var text, finish string
		var stop json.RawMessage
		if stream {
			for _, c := range parseStream(t, raw) {
				text += c.Choices[0].Text
				if c.Choices[0].FinishReason != nil {
					finish, stop = *c.Choices[0].FinishReason, c.Choices[0].StopReason
				}
			}
		} else {
			var r chunk
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			text, finish, stop = r.Choices[0].Text, *r.Choices[0].FinishReason, r.Choices[0].StopReason
		}
		if text != "hello wor" || finish != "stop" || string(stop) != `"ld. T"` {
			t.Fatalf("stream=%v: text %q finish %q stop %s", stream, text, finish, stop)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for env.eng.active() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if env.eng.active() != 0 || len(env.eng.abortedIDs()) < 2 {
		t.Fatalf("stop string did not abort the engine requests: active %d aborted %v", env.eng.active(), env.eng.abortedIDs())
	}
}

func TestNGreaterThanOne(t *testing.T) {
	env := newTestEnv(t, Config{}, "abcdef")
	resp, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"q"}],"max_tokens":4,"n":3,"stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	texts := map[int]string{}
	finished := map[int]bool{}
	for _, c := range parseStream(t, raw) {
		if len(c.Choices) != 1 {
			t.Fatalf("chunk with %d choices", len(c.Choices))
		}
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			texts[ch.Index] += *ch.Delta.Content
		}
		if ch.FinishReason != nil {
			finished[ch.Index] = true
		}
	}
	for i := 0; i < 3; i++ {
		if texts[i] != "abcd" || !finished[i] {
			t.Fatalf("choice %d: %q finished %v", i, texts[i], finished[i])
		}
	}
	// non-streamed with seed: children get seed+i
	resp, raw = env.post("/v1/completions", `{"prompt":"q","max_tokens":2,"n":2,"seed":7}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var r chunk
	_ = json.Unmarshal(raw, &r)
	if len(r.Choices) != 2 || r.Choices[1].Index != 1 || r.Usage.CompletionTokens != 4 {
		t.Fatalf("bad n=2 response %s", raw)
	}
	env.eng.mu.Lock()
	added := env.eng.added[len(env.eng.added)-2:]
	env.eng.mu.Unlock()
	if !strings.HasSuffix(added[0].RequestID, "-0") || !strings.HasSuffix(added[1].RequestID, "-1") || added[0].Params.Seed != 7 || added[1].Params.Seed != 8 {
		t.Fatalf("children ids/seeds: %s %d, %s %d", added[0].RequestID, added[0].Params.Seed, added[1].RequestID, added[1].Params.Seed)
	}
}

func TestEngineDownMidStream(t *testing.T) {
	// One token every 20 ms: the 200-token stream lasts 4 s, so the kill
	// below lands mid-stream even when this goroutine is descheduled for a
	// while (at a 1 ms step the stream could end first on a loaded machine).
	env := newTestEnvStep(t, Config{StreamInterval: 10}, "0123456789abcdefghijklmnopqrstuvwxyz", 20*time.Millisecond)
	req, _ := http.NewRequest("POST", env.http.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":200,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// read the first event, then let a token or two accumulate
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	start := time.Now()
	env.eng.kill()
	var rest strings.Builder
	rest.WriteString("data: x\n") // the line already read
	for {
		line, err := br.ReadString('\n')
		rest.WriteString(line)
		if err != nil {
			break
		}
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("stream took %s to end", time.Since(start))
	}
	evs := sseEvents(t, []byte(rest.String()))
	if evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], `"error"`) {
		t.Fatalf("want error then [DONE], got %q", evs)
	}
	if r, _ := http.Get(env.http.URL + "/health"); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/health %d while engine down", r.StatusCode)
	}
	if r, _ := env.post("/v1/completions", `{"prompt":"x"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("request while engine down: %d", r.StatusCode)
	}
	env.eng.revive()
	deadline := time.Now().Add(2 * time.Second)
	for !env.client.Healthy() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r, _ := http.Get(env.http.URL + "/health"); r.StatusCode != http.StatusOK {
		t.Fatalf("/health %d after revive", r.StatusCode)
	}
	if r, b := env.post("/v1/completions", `{"prompt":"x","max_tokens":3}`); r.StatusCode != 200 {
		t.Fatalf("after revive: %d %s", r.StatusCode, b)
	}
}

func TestFlushOnEngineError(t *testing.T) {
	env := newTestEnv(t, Config{StreamInterval: 100}, "abcdefghij")
	env.eng.failAt = 5
	_, raw := env.post("/v1/completions", `{"prompt":"x","max_tokens":50,"stream":true}`)
	evs := sseEvents(t, raw)
	var text string
	for _, e := range evs[:len(evs)-2] {
		var c chunk
		_ = json.Unmarshal([]byte(e), &c)
		text += c.Choices[0].Text
	}
	if text != "abcde" || !strings.Contains(evs[len(evs)-2], "simulated failure") || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("want all 5 tokens flushed, then the error, then [DONE]; got %q", evs)
	}
}

func TestClientDisconnectAborts(t *testing.T) {
	env := newTestEnv(t, Config{}, "abcdefghij")
	for _, stream := range []string{"true", "false"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", env.http.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":250,"stream":`+stream+`}`))
		go func() {
			time.Sleep(30 * time.Millisecond)
			cancel()
		}()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = bufio.NewReader(resp.Body).ReadString(0)
			resp.Body.Close()
		}
		deadline := time.Now().Add(2 * time.Second)
		for env.eng.active() != 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if env.eng.active() != 0 {
			t.Fatalf("stream=%s: request still running in the engine after disconnect", stream)
		}
		if env.client.InFlight() != 0 {
			t.Fatalf("stream=%s: %d requests still registered", stream, env.client.InFlight())
		}
	}
}

func TestQueueLimitAndAuth(t *testing.T) {
	env := newTestEnv(t, Config{APIKey: "sekret", MaxQueuedRequests: 1}, "abc")
	if r, _ := env.post("/v1/completions", `{"prompt":"x"}`); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", r.StatusCode)
	}
	if r, _ := env.post("/v1/completions", `{"prompt":"x"}`, "Authorization", "Bearer wrong"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", r.StatusCode)
	}
	if r, b := env.post("/v1/completions", `{"prompt":"x","max_tokens":2}`, "Authorization", "Bearer sekret"); r.StatusCode != 200 {
		t.Fatalf("right key: %d %s", r.StatusCode, b)
	}
	for _, p := range []string{"/health", "/metrics", "/version"} {
		if r, err := http.Get(env.http.URL + p); err != nil || r.StatusCode != 200 {
			t.Fatalf("%s must be open", p)
		}
	}
	env.srv.waiting.Add(1) // a request waiting for its first token
	r, _ := env.post("/v1/completions", `{"prompt":"x"}`, "Authorization", "Bearer sekret")
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("queue full: %d retry-after %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	env.srv.waiting.Add(-1)
}

func TestDrain(t *testing.T) {
	// One token every 40 ms: the 250-token stream would last 10 s, so it is
	// still open whenever the test ends it (at a 1 ms step it could finish
	// by itself on a loaded machine before EndStreams).
	env := newTestEnvStep(t, Config{}, "abcdefghij", 40*time.Millisecond)
	resp, err := http.Post(env.http.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"x","max_tokens":250,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Drain once the stream has sent its first event, not after a guessed
	// delay: a request that arrives after BeginDrain gets 503.
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	env.srv.BeginDrain()
	if r, _ := http.Get(env.http.URL + "/health"); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/health %d while draining", r.StatusCode)
	}
	if r, _ := env.post("/v1/completions", `{"prompt":"x"}`); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("new request while draining: %d", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if env.srv.WaitStreams(ctx) {
		t.Fatal("endless stream finished by itself")
	}
	env.srv.EndStreams()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	evs := sseEvents(t, append([]byte(first), rest...))
	if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], "shutting down") {
		t.Fatalf("stream not ended with error+[DONE]: %q", evs[max(0, len(evs)-3):])
	}
}

// TestSlowClient fills the socket of a client that does not read: the
// engine loop must not stall, the pending tokens merge into fewer chunks,
// and once the client reads, it gets the whole text and [DONE].
func TestSlowClient(t *testing.T) {
	env := newTestEnv(t, Config{sndBuf: 4096}, strings.Repeat("0123456789", 30))
	resp, err := http.Post(env.http.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"x","max_tokens":250,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// a second, fast stream runs meanwhile: the slow one must not hold it up
	start := time.Now()
	if r, _ := env.post("/v1/completions", `{"prompt":"y","max_tokens":200,"stream":true}`); r.StatusCode != 200 {
		t.Fatalf("fast stream: %d", r.StatusCode)
	}
	fast := time.Since(start)
	time.Sleep(300 * time.Millisecond) // the slow stream's engine request has finished by now
	var body strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		body.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	chunks := parseStream(t, []byte(body.String()))
	var text string
	for _, c := range chunks {
		if len(c.Choices) > 0 {
			text += c.Choices[0].Text
		}
	}
	if text != strings.Repeat("0123456789", 30)[:250] {
		t.Fatalf("slow client got %d bytes of text", len(text))
	}
	t.Logf("slow client: %d chunks for 250 tokens", len(chunks))
	if len(chunks) >= 250 {
		t.Fatalf("%d chunks for 250 tokens: nothing merged while the client was slow", len(chunks))
	}
	if fast > 2*time.Second {
		t.Fatalf("fast stream took %s", fast)
	}
}

// TestPlainWriterFallback serves a stream through a ResponseWriter that
// cannot be hijacked (as with HTTP/2): the same events must come out.
func TestPlainWriterFallback(t *testing.T) {
	env := newTestEnv(t, Config{}, "fallback text")
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`))
	rec := httptest.NewRecorder()
	env.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var text string
	chunks := parseStream(t, rec.Body.Bytes())
	for _, c := range chunks {
		if len(c.Choices) > 0 {
			text += c.Choices[0].Text
		}
	}
	if text != "fallback" || chunks[len(chunks)-1].Usage == nil {
		t.Fatalf("text %q; body %s", text, rec.Body.String())
	}
}

// TestClientNeverReads is issue 21 item 5: a stream whose client never
// reads (n 8, logprobs 5, a tiny receive window) must not hold unbounded
// memory. Past MaxStreamBufferBytes the request is aborted in the engine
// long before max_tokens, the socket is closed, and the server serves the
// next request as usual.
func TestClientNeverReads(t *testing.T) {
	const limit = 16 << 10
	env := newTestEnv(t, Config{sndBuf: 4096, MaxStreamBufferBytes: limit}, strings.Repeat("0123456789", 30))
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(env.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"x","max_tokens":240,"n":8,"logprobs":5,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// never read: the engine must see all 8 requests aborted
	deadline := time.Now().Add(10 * time.Second)
	for len(env.eng.abortedIDs()) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("aborted %v after 10 s; want the 8 requests of the unread stream", env.eng.abortedIDs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, a := range env.eng.added {
		if !strings.HasPrefix(a.RequestID, "cmpl-") {
			t.Fatalf("unexpected request %s", a.RequestID)
		}
	}
	// the stream's socket is closed: reading now drains and ends
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if err != nil {
		t.Fatalf("read the aborted stream: %v after %d bytes", err, n)
	}
	if n >= 240*8*100 {
		t.Fatalf("%d bytes reached the client: the stream was not cut short", n)
	}
	// the server is fine
	r, text := env.post("/v1/completions", `{"prompt":"y","max_tokens":5}`)
	if r.StatusCode != 200 || !strings.Contains(string(text), `"text":"01234"`) {
		t.Fatalf("next request: %d %s", r.StatusCode, text)
	}
}

// TestStreamBothConnPaths streams the same request over a kept connection
// (sse.ConnContext, as api-frontend serves: the head waits for the first
// chunk, the end leaves with net/http's terminating chunk) and over a
// taken-over one (a server without the hook): the bodies are the same, and
// the kept connection serves the next request.
func TestStreamBothConnPaths(t *testing.T) {
	const body = `{"prompt":"hi","max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}`
	env := newTestEnv(t, Config{}, "The quick brown fox.")
	hijacking := httptest.NewServer(env.srv.Handler())
	t.Cleanup(hijacking.Close)
	get := func(url string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	keptResp, kept := get(env.http.URL)
	takenResp, taken := get(hijacking.URL)
	if keptResp.Close || !takenResp.Close {
		t.Errorf("Close: kept %v, taken over %v; want false, true", keptResp.Close, takenResp.Close)
	}
	// ids and timestamps differ, and at stream interval 1 a slow writer
	// (the race detector) may merge tokens into one chunk: compare each
	// body's text, finish reasons, usage and end instead of its chunking.
	norm := func(s string) string {
		var text, finish, usage strings.Builder
		for _, line := range strings.Split(s, "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Text         string  `json:"text"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("chunk %q: %v", data, err)
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Text)
				if ch.FinishReason != nil {
					finish.WriteString(*ch.FinishReason + ";")
				}
			}
			usage.Write(c.Usage)
		}
		return fmt.Sprintf("text %q finish %s usage %s", text.String(), finish.String(), usage.String())
	}
	if norm(kept) != norm(taken) || !strings.HasSuffix(kept, "data: [DONE]\n\n") || !strings.Contains(norm(kept), `"The quick br"`) {
		t.Fatalf("kept body\n%s\ntaken-over body\n%s", kept, taken)
	}
	if _, again := get(env.http.URL); norm(again) != norm(kept) {
		t.Fatalf("second request on the kept connection:\n%s", again)
	}
}
