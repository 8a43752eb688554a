package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// splitPhase is what one measured window of benchmarkSplit saw.
type splitPhase struct {
	name      string
	maxTokens int
	cpu       time.Duration // frontend user+system CPU over the window
	user, sys time.Duration
	tokens    int64   // generated tokens (the engine's count)
	requests  float64 // requests over the window: mean of those started and those finished
	elapsed   time.Duration
	mallocs   float64 // heap allocations of the frontend over the window (go_memstats_mallocs_total)
	gcs       float64 // garbage collections of the frontend over the window
	// sendCPU is the frontend's CPU in its batched sends over the window
	// (sluice_frontend_send_batch_cpu_seconds_total, µs; 0 on a build
	// without the counter).
	sendCPU float64
}

// solveSplit solves cpu = a·requests + b·tokens for the per-request cost a
// and the per-token cost b (both in µs) from two windows with different
// output lengths; pick selects which CPU time (total, user, system).
func solveSplit(s, l splitPhase, pick func(splitPhase) time.Duration) (perReq, perTok float64) {
	return solveSplitF(s, l, func(p splitPhase) float64 { return float64(pick(p).Microseconds()) })
}

// solveSplitF is solveSplit for any per-window count (CPU µs,
// allocations): cost = a·requests + b·tokens.
func solveSplitF(s, l splitPhase, pick func(splitPhase) float64) (perReq, perTok float64) {
	cs, cl := pick(s), pick(l)
	rs, rl := s.requests, l.requests
	ts, tl := float64(s.tokens), float64(l.tokens)
	det := rs*tl - rl*ts
	if det == 0 {
		return 0, 0
	}
	return (cs*tl - cl*ts) / det, (rs*cl - rl*cs) / det
}

// benchmarkSplit measures the frontend's CPU per request and per streamed
// token: the same streams run two windows, one where every request asks
// for short outputs (16 tokens: the per-request path dominates) and one
// with long outputs (512 tokens: the per-token path does), and the two
// equations cpu = a·requests + b·tokens give a (cpu-us/request) and b
// (cpu-us/token); the frontend's heap allocations (go_memstats_mallocs_total
// in its /metrics) give allocs/request and allocs/token the same way. Each
// of the streams client goroutines sends one
// /v1/completions request at a time (a 32-token text prompt, stream,
// ignore_eos) and reads its body to the end; a new one starts as soon as it
// finishes (SLUICE_BENCH_SPLIT_API=chat: one user message to
// /v1/chat/completions). Requests are counted by the client; tokens are the engine's own
// count; CPU is the api-frontend process's, from /proc.
func benchmarkSplit(b *testing.B, streams, interval, stepMS int, window time.Duration) {
	const promptTokens = 32
	short, long := envInt("SLUICE_BENCH_SHORT_TOKENS", 16), envInt("SLUICE_BENCH_LONG_TOKENS", 512)
	addr := engineAddr(b)
	start(b, "engine-core", "--model", "demo", "--executor", "sim", "--listen", addr, "--log-format", "console",
		"--max-num-seqs", strconv.Itoa(streams), "--sim-step-ms", strconv.Itoa(stepMS), "--max-num-batched-tokens", "65536")
	port := freePort(b)
	fe := start(b, "api-frontend", "--model", "demo", "--engine", addr, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--stream-interval", strconv.Itoa(interval), "--log-format", "json", "--pprof-addr", os.Getenv("SLUICE_BENCH_PPROF"))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(b, base, http.StatusOK, 60*time.Second)
	conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: "bench-observer"})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	generated := func() int64 {
		r, err := conn.Call("stats", nil, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		return decodeStats(b, r.Result).GeneratedTokens
	}
	prompt := promptOfTokens(b, base, promptTokens)
	// SLUICE_BENCH_SPLIT_API=chat sends the prompt as one user message to
	// /v1/chat/completions instead (the chat template adds its tokens).
	chat := os.Getenv("SLUICE_BENCH_SPLIT_API") == "chat"

	// phase holds the max_tokens of the requests clients start now.
	var phase atomic.Int64
	phase.Store(int64(short))
	var started, finished, failed atomic.Int64
	var firstErr atomic.Value
	tr := &http.Transport{MaxIdleConnsPerHost: streams, DialContext: (&net.Dialer{}).DialContext}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			buf := make([]byte, 32<<10)
			last := 0
			for ctx.Err() == nil {
				n := int(phase.Load())
				if n != short && last != n {
					// The first long request of each client has a random
					// length, so that long requests start and end all
					// through the window rather than all at once.
					n = short + rng.IntN(n-short+1)
				}
				last = int(phase.Load())
				body := fmt.Sprintf(`{"model":"demo","prompt":%q,"max_tokens":%d,"ignore_eos":true,"stream":true}`, prompt, n)
				path := "/v1/completions"
				if chat {
					body = fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":%q}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, prompt, n)
					path = "/v1/chat/completions"
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				started.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
				resp.Body.Close()
				switch {
				case ctx.Err() != nil:
				case err != nil || resp.StatusCode != http.StatusOK:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("HTTP %d: %v", resp.StatusCode, err))
				default:
					finished.Add(1)
				}
			}
		}(uint64(i))
	}
	defer func() { cancel(); wg.Wait() }()

	measure := func(name string, maxTokens int) splitPhase {
		phase.Store(int64(maxTokens))
		// Settle: every stream running, and the short requests of the
		// window before ended.
		time.Sleep(time.Second + time.Duration(2*short*stepMS)*time.Millisecond)
		if name == "short" && os.Getenv("SLUICE_BENCH_PPROF") != "" {
			go saveProfile(os.Getenv("SLUICE_BENCH_PPROF"), window, fmt.Sprintf("/tmp/sluice-frontend-split-%d.pprof", interval))
		}
		u0, s0, err := procCPUSplit(fe.Cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		m0, gc0 := scrape(b, base, "go_memstats_mallocs_total"), scrape(b, base, "go_gc_duration_seconds_count")
		st0, fi0, g0 := started.Load(), finished.Load(), generated()
		t0 := time.Now()
		time.Sleep(window)
		u1, s1, _ := procCPUSplit(fe.Cmd.Process.Pid)
		st1, fi1, g1 := started.Load(), finished.Load(), generated()
		m1, gc1 := scrape(b, base, "go_memstats_mallocs_total"), scrape(b, base, "go_gc_duration_seconds_count")
		p := splitPhase{name: name, maxTokens: maxTokens, user: u1 - u0, sys: s1 - s0, tokens: g1 - g0,
			requests: float64(st1-st0+fi1-fi0) / 2, elapsed: time.Since(t0), mallocs: m1 - m0, gcs: gc1 - gc0}
		p.cpu = p.user + p.sys
		return p
	}
	// The short window first (the clients start with short requests), then
	// the long one, whose first random lengths spread the long requests'
	// starts and ends over the window.
	sp := measure("short", short)
	lp := measure("long", long)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests failed; first: %v", n, firstErr.Load())
	}
	if sp.tokens == 0 || lp.tokens == 0 || sp.requests == 0 {
		b.Fatalf("nothing measured: short %+v long %+v", sp, lp)
	}
	perReq, perTok := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.cpu })
	userReq, userTok := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.user })
	sysReq, sysTok := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.sys })
	b.ReportMetric(perReq, "cpu-us/request")
	b.ReportMetric(perTok, "cpu-us/token")
	b.ReportMetric(userReq, "user-us/request")
	b.ReportMetric(sysReq, "sys-us/request")
	b.ReportMetric(userTok, "user-us/token")
	b.ReportMetric(sysTok, "sys-us/token")
	b.ReportMetric(sp.requests/sp.elapsed.Seconds(), "short-requests/s")
	// All-in: the short window's frontend CPU over its requests (16 tokens
	// each by default), a difference-free reading of the same path.
	b.ReportMetric(float64(sp.cpu.Microseconds())/sp.requests, "short-cpu-us/request")
	// Allocations: each window's two /metrics scrapes add their own (a few
	// thousand, the same in both windows), which the split leaves in the
	// per-request figure as ~1 per request at 256 streams.
	allocReq, allocTok := solveSplitF(sp, lp, func(p splitPhase) float64 { return p.mallocs })
	b.ReportMetric(allocReq, "allocs/request")
	b.ReportMetric(allocTok, "allocs/token")
	b.ReportMetric(sp.gcs/sp.elapsed.Seconds(), "short-gcs/s")
	for _, p := range []splitPhase{sp, lp} {
		b.Logf("%s window (max_tokens %d): %.0f requests, %d tokens in %s, frontend CPU %s (user %s, sys %s): %.2f µs/token all-in",
			p.name, p.maxTokens, p.requests, p.tokens, p.elapsed.Round(time.Millisecond), p.cpu, p.user, p.sys,
			float64(p.cpu.Microseconds())/float64(p.tokens))
	}
	b.Logf("streams=%d interval=%d: %.1f µs/request (user %.1f, sys %.1f) + %.2f µs/token (user %.2f, sys %.2f)",
		streams, interval, perReq, userReq, sysReq, perTok, userTok, sysTok)
}

// saveProfile saves a CPU profile of the next window from the frontend's
// pprof address to path: go tool pprof bin/api-frontend path.
func saveProfile(addr string, window time.Duration, path string) {
	r, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(int(window.Seconds())-1, 1)))
	if err != nil {
		return
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	_ = os.WriteFile(path, data, 0o644)
}

// promptOfTokens returns a text that the served tokenizer encodes as n
// tokens (with its special tokens), as vLLM's random dataset does: token
// ids of a long text, cut, decoded and re-encoded until the count fits.
func promptOfTokens(b *testing.B, base string, n int) string {
	post := func(path string, req any, resp any) {
		body, _ := json.Marshal(req)
		r, err := http.Post(base+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(r.Body)
			b.Fatalf("%s: HTTP %d: %s", path, r.StatusCode, data)
		}
		if err := json.NewDecoder(bufio.NewReader(r.Body)).Decode(resp); err != nil {
			b.Fatal(err)
		}
	}
	encode := func(text string, special bool) []int {
		var out struct {
			Tokens []int `json:"tokens"`
		}
		post("/tokenize", map[string]any{"model": "demo", "prompt": text, "add_special_tokens": special}, &out)
		return out.Tokens
	}
	text := strings.Repeat("Once upon a time there was a little girl who loved to play in the park with her friends. ", 8)
	ids := encode(text, false)
	if len(ids) < n {
		b.Fatalf("seed text has %d tokens, fewer than %d", len(ids), n)
	}
	for cut := n; cut > 0; cut-- {
		var out struct {
			Prompt string `json:"prompt"`
		}
		post("/detokenize", map[string]any{"model": "demo", "tokens": ids[:cut]}, &out)
		if got := len(encode(out.Prompt, true)); got == n {
			return out.Prompt
		} else if got < n {
			break
		}
	}
	b.Fatalf("no prefix of the seed text encodes to %d tokens", n)
	return ""
}
