package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// longSchema yields far more than benchMaxTokens tokens, so constrained
// requests run to max_tokens exactly like the unconstrained ones (which
// ignore EOS): both modes then do the same prefill and decode work per
// request, and only the constraint differs.
const longSchema = `{"type":"object","properties":{"items":{"type":"array","minItems":40,"maxItems":40,"items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"type":"string","maxLength":30},"ok":{"type":"boolean"}},"required":["id","label","ok"]}}},"required":["items"]}`

const benchMaxTokens = 128

// BenchmarkStructuredThroughput compares client-side decode throughput
// with and without response_format json_schema on the demo model (CPU
// executor), with SLUICE_BENCH_STREAMS (default 64) concurrent requests
// looping for SLUICE_BENCH_SECONDS (default 15) per round; modes alternate
// over SLUICE_BENCH_ROUNDS (default 2) rounds to spread machine noise.
// SLUICE_BENCH_MODEL (default "demo", the tiny shape) may name another
// model directory, e.g. the cached demo 15m shape (32000-token vocabulary).
//
//	go test -run XXX -bench StructuredThroughput -benchtime 1x ./api-frontend/e2etest/
func BenchmarkStructuredThroughput(b *testing.B) {
	streams := envInt("SLUICE_BENCH_STREAMS", 64)
	window := time.Duration(envInt("SLUICE_BENCH_SECONDS", 15)) * time.Second
	rounds := envInt("SLUICE_BENCH_ROUNDS", 2)
	model := os.Getenv("SLUICE_BENCH_MODEL")
	if model == "" {
		model = "demo"
	}
	addr := engineAddr(b)
	eng := start(b, "engine-core", "--model", model, "--executor", "cpu", "--listen", addr, "--log-format", "console",
		"--max-num-seqs", strconv.Itoa(streams))
	port := freePort(b)
	fe := start(b, "api-frontend", "--model", model, "--engine", addr, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log-format", "json")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(b, base, http.StatusOK, 60*time.Second)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	plain := fmt.Sprintf(`{"messages":[{"role":"user","content":"List things."}],"max_tokens":%d,"ignore_eos":true,"temperature":1}`, benchMaxTokens)
	constrained := fmt.Sprintf(`{"messages":[{"role":"user","content":"List things."}],"max_tokens":%d,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"list","schema":%s}}}`, benchMaxTokens, longSchema)
	for i := 0; i < b.N; i++ {
		var tps, per, cpu, engCPU [2]float64
		pids := []int{eng.Cmd.Process.Pid, fe.Cmd.Process.Pid}
		for r := 0; r < rounds; r++ {
			for m, body := range []string{plain, constrained} {
				l := runLoad(b, client, base, body, streams, window, pids)
				tps[m] += l.tps / float64(rounds)
				per[m] += l.perRequest / float64(rounds)
				cpu[m] += l.cpuPerToken / float64(rounds)
				engCPU[m] += l.engineCPU / float64(rounds)
				b.Logf("round %d %s: %.0f tokens/s, %.1f tokens/request, CPU µs/token: engine %.1f + frontend %.1f", r, []string{"plain", "json"}[m], l.tps, l.perRequest, l.engineCPU, l.cpuPerToken-l.engineCPU)
			}
		}
		b.ReportMetric(cpu[0], "plain-cpu-us/token")
		b.ReportMetric(cpu[1], "json-cpu-us/token")
		if per[1] < benchMaxTokens-0.5 {
			b.Logf("warning: constrained requests averaged %.1f tokens, less than max_tokens %d", per[1], benchMaxTokens)
		}
		b.ReportMetric(tps[0], "plain-tokens/s")
		b.ReportMetric(tps[1], "json-tokens/s")
		b.ReportMetric(100*tps[1]/tps[0], "json-%-of-plain")
		b.Logf("streams=%d: unconstrained %.0f tokens/s, json_schema %.0f tokens/s (%.1f%%); CPU µs/token engine %.1f vs %.1f, frontend %.1f vs %.1f (plain/json total CPU ratio %.1f%%)",
			streams, tps[0], tps[1], 100*tps[1]/tps[0], engCPU[0], engCPU[1], cpu[0]-engCPU[0], cpu[1]-engCPU[1], 100*cpu[0]/cpu[1])
	}
}

// load is one measured window.
type load struct {
	tps         float64 // completion tokens/s streamed inside the window
	perRequest  float64 // mean completion tokens of the requests finished in it
	cpuPerToken float64 // CPU µs of the server processes per token
	engineCPU   float64 // of which the engine's (the first pid)
}

// runLoad keeps streams streamed requests of body in flight for window
// (after a 2 s warm-up). Tokens are counted as they arrive, from each
// chunk's cumulative usage (continuous_usage_stats), so long requests
// count in proportion to what they generated inside the window; the CPU
// time of the processes pids is measured over the same window.
func runLoad(b *testing.B, client *http.Client, base, body string, streams int, window time.Duration, pids []int) load {
	body = strings.Replace(body, "{", `{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},`, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tokens, finishedTokens, requests atomic.Int64
	var counting atomic.Bool
	var failed atomic.Value
	var wg sync.WaitGroup
	key := []byte(`"completion_tokens":`)
	for w := 0; w < streams; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				if resp.StatusCode != 200 {
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					failed.Store(fmt.Sprintf("status %d: %s", resp.StatusCode, data))
					return
				}
				rd := bufio.NewReaderSize(resp.Body, 64<<10)
				var last int64
				for {
					line, err := rd.ReadSlice('\n')
					if i := bytes.LastIndex(line, key); i >= 0 {
						rest := line[i+len(key):]
						j := bytes.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
						if n, perr := strconv.ParseInt(string(rest[:max(j, 0)]), 10, 64); perr == nil && n > last {
							if counting.Load() {
								tokens.Add(n - last)
							}
							last = n
						}
					}
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				if counting.Load() && ctx.Err() == nil {
					finishedTokens.Add(last)
					requests.Add(1)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	cpuNow := func() (sum, first time.Duration) {
		for i, pid := range pids {
			c, err := procCPU(pid)
			if err != nil {
				b.Fatal(err)
			}
			sum += c
			if i == 0 {
				first = c
			}
		}
		return sum, first
	}
	cpu0, eng0 := cpuNow()
	counting.Store(true)
	t0 := time.Now()
	time.Sleep(window)
	counting.Store(false)
	el := time.Since(t0)
	cpu1, eng1 := cpuNow()
	cpu := cpu1 - cpu0
	cancel()
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	n := float64(max(tokens.Load(), 1))
	return load{tps: float64(tokens.Load()) / el.Seconds(), perRequest: float64(finishedTokens.Load()) / float64(max(requests.Load(), 1)), cpuPerToken: float64(cpu.Microseconds()) / n,
		engineCPU: float64((eng1 - eng0).Microseconds()) / n}
}
