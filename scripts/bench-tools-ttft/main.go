// Command bench-tools-ttft measures the time to the first content token of
// streamed chat completions with and without `tools` attached (issue 7: a
// tool-call parser must not delay prose when tools are present). It keeps
// --concurrency requests in flight; request i carries the tools when i is
// odd (mode "mixed", the default, so both kinds see the same load), or
// always ("tools") or never ("none"). For each kind it prints the TTFT of the
// first chunk with non-empty delta.content and of the first chunk of any
// kind, p50/p90/p99, and checks that no tool call was returned.
//
//	go run ./scripts/bench-tools-ttft --base-url http://127.0.0.1:8000 --requests 512 --concurrency 64
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tools are four OpenAI function definitions, about the size of a real agent's.
const tools = `[
 {"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}},
 {"type":"function","function":{"name":"search_web","description":"Search the web and return the top results","parameters":{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":10}},"required":["query"]}}},
 {"type":"function","function":{"name":"read_file","description":"Read a file from the workspace","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
 {"type":"function","function":{"name":"send_email","description":"Send an e-mail","parameters":{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}}}
]`

// sample is one finished request.
type sample struct {
	tools        bool
	firstChunk   time.Duration // first SSE data event
	firstContent time.Duration // first event with non-empty delta.content
	contentBytes int
	toolCalls    int
	err          error
}

// chunk is the part of a chat.completion.chunk this program reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content   string            `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-tools-ttft:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("base-url", "http://127.0.0.1:8000", "server base URL")
	model := flag.String("model", "", "model name (default: first of /v1/models)")
	requests := flag.Int("requests", 512, "requests to send")
	conc := flag.Int("concurrency", 64, "requests in flight")
	maxTokens := flag.Int("max-tokens", 32, "max_tokens per request")
	mode := flag.String("mode", "mixed", "mixed (odd requests carry tools), tools or none")
	prompt := flag.String("prompt", "Tell me a short story about a lighthouse keeper.", "user message")
	jsonOut := flag.String("result-json", "", "write the figures as JSON to this file")
	flag.Parse()
	if *mode != "mixed" && *mode != "tools" && *mode != "none" {
		return fmt.Errorf("--mode %q: want mixed, tools or none", *mode)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc, DisableCompression: true}}
	if *model == "" {
		m, err := firstModel(client, *base)
		if err != nil {
			return err
		}
		*model = m
	}
	bodies := [2][]byte{}
	for i, withTools := range []bool{false, true} {
		req := map[string]any{
			"model":      *model,
			"messages":   []map[string]string{{"role": "user", "content": *prompt}},
			"max_tokens": *maxTokens,
			"stream":     true,
		}
		if withTools {
			req["tools"] = json.RawMessage(tools)
			req["tool_choice"] = "auto"
		}
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		bodies[i] = b
	}
	samples := make([]sample, *requests)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *requests {
					return
				}
				withTools := *mode == "tools" || (*mode == "mixed" && i%2 == 1)
				b := bodies[0]
				if withTools {
					b = bodies[1]
				}
				samples[i] = one(client, *base, b)
				samples[i].tools = withTools
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	fmt.Printf("requests %d, concurrency %d, mode %s, max_tokens %d, wall %.2f s\n", *requests, *conc, *mode, *maxTokens, wall.Seconds())
	result := map[string]any{"requests": *requests, "concurrency": *conc, "mode": *mode, "max_tokens": *maxTokens, "wall_s": wall.Seconds()}
	fmt.Printf("%-6s %5s %6s %9s | %-27s | %-27s | %s\n", "tools", "ok", "failed", "toolcalls", "TTFT content p50/p90/p99 ms", "TTFT any chunk p50/p90/p99", "content B/req")
	for _, withTools := range []bool{false, true} {
		var content, first []float64
		failed, calls, bytesTotal := 0, 0, 0
		var firstErr error
		for _, s := range samples {
			if s.tools != withTools {
				continue
			}
			if s.err != nil {
				failed++
				if firstErr == nil {
					firstErr = s.err
				}
				continue
			}
			calls += s.toolCalls
			bytesTotal += s.contentBytes
			first = append(first, ms(s.firstChunk))
			if s.firstContent > 0 {
				content = append(content, ms(s.firstContent))
			}
		}
		name := "absent"
		if withTools {
			name = "present"
		}
		if len(first) == 0 && failed == 0 {
			continue
		}
		per := 0
		if len(first) > 0 {
			per = bytesTotal / len(first)
		}
		fmt.Printf("%-6s %5d %6d %9d | %7.1f / %7.1f / %7.1f   | %7.1f / %7.1f / %7.1f   | %d\n", name, len(first), failed, calls,
			pct(content, 50), pct(content, 90), pct(content, 99), pct(first, 50), pct(first, 90), pct(first, 99), per)
		if firstErr != nil {
			fmt.Printf("  first error: %v\n", firstErr)
		}
		result[name] = map[string]any{
			"ok": len(first), "failed": failed, "tool_calls": calls, "content_bytes_per_request": per,
			"ttft_content_p50_ms": pct(content, 50), "ttft_content_p90_ms": pct(content, 90), "ttft_content_p99_ms": pct(content, 99),
			"ttft_content_mean_ms": mean(content),
			"ttft_chunk_p50_ms":    pct(first, 50), "ttft_chunk_p99_ms": pct(first, 99),
		}
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(result, "", "  ")
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonOut, err)
		}
	}
	return nil
}

// one sends a streaming chat request and times its first chunks.
func one(client *http.Client, base string, body []byte) sample {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return sample{err: fmt.Errorf("new request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{err: fmt.Errorf("post: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return sample{err: fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	var s sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(line, []byte("[DONE]")) {
			return s
		}
		now := time.Since(t0)
		if s.firstChunk == 0 {
			s.firstChunk = now
		}
		var c chunk
		if err := json.Unmarshal(line, &c); err != nil {
			return sample{err: fmt.Errorf("decode chunk %q: %w", line, err)}
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" && s.firstContent == 0 {
				s.firstContent = now
			}
			s.contentBytes += len(ch.Delta.Content)
			s.toolCalls += len(ch.Delta.ToolCalls)
		}
	}
	if err := sc.Err(); err != nil {
		return sample{err: fmt.Errorf("read stream: %w", err)}
	}
	return sample{err: errors.New("stream ended without [DONE]")}
}

func firstModel(client *http.Client, base string) (string, error) {
	resp, err := client.Get(base + "/v1/models")
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("decode /v1/models: %w", err)
	}
	if len(list.Data) == 0 {
		return "", errors.New("/v1/models lists no model")
	}
	return list.Data[0].ID, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile with linear interpolation (numpy's default).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := float64(len(s)-1) * p / 100
	f := int(k)
	c := min(f+1, len(s)-1)
	return s[f] + (s[c]-s[f])*(k-float64(f))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}
