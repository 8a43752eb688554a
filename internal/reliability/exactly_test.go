package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// completion is the non-streamed answer's part the tests read.
type completion struct {
	Choices []struct {
		Text     string `json:"text"`
		Logprobs *struct {
			Tokens []string `json:"tokens"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// reference is what the engine generates for one (prompt, seed).
type reference struct {
	text   string
	tokens []string
}

func exactlyBody(i, maxTokens int, stream bool, interval int) string {
	b := fmt.Sprintf(`{"model":"demo","prompt":"exactly once %d","seed":%d,"max_tokens":%d,"ignore_eos":true,"logprobs":0`, i, 1000+i, maxTokens)
	if stream {
		b += fmt.Sprintf(`,"stream":true,"stream_interval":%d,"stream_options":{"include_usage":true}`, interval)
	}
	return b + "}"
}

// TestExactlyOnce: 500 concurrent streams at stream intervals 1, 4 and 16
// with randomly slow readers each receive exactly the tokens the engine
// generated (the non-streamed answer for the same prompt and seed), in
// order, once, with matching usage.
func TestExactlyOnce(t *testing.T) {
	const prompts, maxTokens = 50, 48
	n := 500
	if testing.Short() {
		n = 150
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "2")
	fe := startFrontend(t, addr)

	refs := make([]reference, prompts)
	for i := range refs {
		resp, err := post(context.Background(), fe.base, "/v1/completions", exactlyBody(i, maxTokens, false, 0))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var c completion
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 || c.Choices[0].Logprobs == nil {
			t.Fatalf("reference %d: %d %s", i, resp.StatusCode, b)
		}
		ch := c.Choices[0]
		if len(ch.Logprobs.Tokens) != maxTokens || c.Usage.CompletionTokens != maxTokens || ch.FinishReason != "length" {
			t.Fatalf("reference %d: %d tokens, usage %d, finish %q", i, len(ch.Logprobs.Tokens), c.Usage.CompletionTokens, ch.FinishReason)
		}
		refs[i] = reference{text: ch.Text, tokens: ch.Logprobs.Tokens}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	intervals := []int{1, 4, 16}
	var wg sync.WaitGroup
	var lost, dup, bad atomic.Int64
	var delivered atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	start := make(chan struct{})
	for s := 0; s < n; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			p, iv := s%prompts, intervals[s%len(intervals)]
			rng := rand.New(rand.NewPCG(uint64(s), 99))
			<-start
			resp, err := post(ctx, fe.base, "/v1/completions", exactlyBody(p, maxTokens, true, iv))
			if err != nil {
				bad.Add(1)
				fail("stream %d: %v", s, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				bad.Add(1)
				fail("stream %d: status %d %s", s, resp.StatusCode, b)
				return
			}
			sse := newSSE(resp.Body)
			if rng.IntN(3) == 0 { // a slow reader: the frontend must merge, not drop
				sse.delay = func() { time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) }
			}
			evs, err := sse.all()
			if err != nil {
				bad.Add(1)
				fail("stream %d: read: %v", s, err)
				return
			}
			r, err := summarize(evs)
			if err != nil {
				bad.Add(1)
				fail("stream %d: %v", s, err)
				return
			}
			var got []string
			for _, e := range evs {
				var c chunk
				if e == "[DONE]" || json.Unmarshal([]byte(e), &c) != nil {
					continue
				}
				for _, ch := range c.Choices {
					if ch.Logprobs != nil {
						got = append(got, ch.Logprobs.Tokens...)
					}
				}
			}
			want := refs[p]
			delivered.Add(int64(len(got)))
			switch {
			case len(got) < len(want.tokens):
				lost.Add(int64(len(want.tokens) - len(got)))
			case len(got) > len(want.tokens):
				dup.Add(int64(len(got) - len(want.tokens)))
			}
			if strings.Join(got, "\x00") != strings.Join(want.tokens, "\x00") || r.text != want.text {
				bad.Add(1)
				fail("stream %d (prompt %d, interval %d): %d tokens %q, want %d %q", s, p, iv, len(got), tail(r.text, 80), len(want.tokens), tail(want.text, 80))
				return
			}
			if !r.done || r.afterDone != 0 || r.errAt >= 0 || r.usage != maxTokens || r.finish != "length" {
				bad.Add(1)
				fail("stream %d: done %v afterDone %d error %q usage %d finish %q", s, r.done, r.afterDone, r.errMsg, r.usage, r.finish)
			}
			if iv > 1 && r.chunks > 1+(maxTokens+iv-1)/iv+1 {
				bad.Add(1)
				fail("stream %d: %d chunks at interval %d for %d tokens", s, r.chunks, iv, maxTokens)
			}
		}(s)
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if lost.Load() != 0 || dup.Load() != 0 || bad.Load() != 0 {
		t.Errorf("%d tokens lost, %d duplicated, %d bad streams of %d", lost.Load(), dup.Load(), bad.Load(), n)
	}
	t.Logf("%d concurrent streams × %d tokens at intervals 1/4/16 in %s: %d tokens delivered, %d lost, %d duplicated",
		n, maxTokens, time.Since(t0).Round(time.Millisecond), delivered.Load(), lost.Load(), dup.Load())
	record(t, "streams", n)
	record(t, "tokens delivered", delivered.Load())
	record(t, "tokens lost", lost.Load())
}
