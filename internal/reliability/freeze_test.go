package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFrontendSIGSTOPResumes: a frontend frozen (SIGSTOP) for 4 s, past the
// engine's 2.5 s liveness limit, loses nothing: the engine parks it (its
// requests run on, their outputs are held) instead of dropping it, and
// after SIGCONT every stream completes normally with exactly the text the
// same request gets unfrozen; the frontend is healthy afterwards (issue
// 21: a frontend dropped as silent used to fail every request it had).
func TestFrontendSIGSTOPResumes(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "5")
	fe := startFrontend(t, addr)
	const n, maxTokens = 6, 1500
	body := func(i int, stream bool) string {
		b := fmt.Sprintf(`{"model":"demo","prompt":"freeze stream %d","max_tokens":%d,"ignore_eos":true,"seed":%d`, i, maxTokens, 1000+i)
		if stream {
			b += fmt.Sprintf(`,"stream":true,"stream_interval":%d,"stream_options":{"include_usage":true}`, []int{1, 4, 16}[i%3])
		}
		return b + "}"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	evs := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		_, sse := openStream(t, ctx, fe.base, "/v1/completions", body(i, true))
		first, err := sse.next() // running in the engine
		if err != nil {
			t.Fatalf("stream %d: first event: %v", i, err)
		}
		evs[i] = []string{first}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rest, err := sse.all()
			evs[i], errs[i] = append(evs[i], rest...), err
		}(i)
	}
	time.Sleep(100 * time.Millisecond)
	fe.Signal(syscall.SIGSTOP)
	time.Sleep(4 * time.Second)
	fe.Signal(syscall.SIGCONT)
	wg.Wait()
	for i := range evs {
		if errs[i] != nil {
			t.Errorf("stream %d: read error %v", i, errs[i])
			continue
		}
		r, err := summarize(evs[i])
		if err != nil {
			t.Errorf("stream %d: %v", i, err)
			continue
		}
		if r.errAt >= 0 || !r.done || r.afterDone != 0 || r.finish != "length" || r.usage != maxTokens {
			t.Errorf("stream %d: error %q, done %v, finish %q, usage %d; want a normal end at max_tokens %d", i, r.errMsg, r.done, r.finish, r.usage, maxTokens)
			continue
		}
		if want := completionText(t, fe.base, body(i, false)); r.text != want {
			t.Errorf("stream %d: %d bytes of text, differs from the unfrozen run's %d bytes", i, len(r.text), len(want))
		}
	}
	if code, err := healthCode(fe.base); code != http.StatusOK {
		t.Errorf("/health after SIGCONT: %d (%v), want 200", code, err)
	}
	checkServes(t, fe.base)
}

// completionText runs a non-streamed completion and returns its text.
func completionText(t *testing.T, base, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := post(ctx, base, "/v1/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: status %d, %v: %s", resp.StatusCode, err, tail(string(b), 300))
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("completion answer %q: %v", tail(string(b), 300), err)
	}
	return out.Choices[0].Text
}
