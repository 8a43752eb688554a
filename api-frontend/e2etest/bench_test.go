package e2etest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// procCPU returns the user+system CPU time of pid from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	u, s, err := procCPUSplit(pid)
	return u + s, err
}

// procCPUSplit returns the user and the system CPU time of pid from
// /proc/<pid>/stat.
func procCPUSplit(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	// fields after ")": state(0) ... utime(11) stime(12)
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	const hz = 100 // USER_HZ
	return time.Duration(ut) * time.Second / hz, time.Duration(st) * time.Second / hz, nil
}

// BenchmarkFrontendCPU measures the api-frontend process's CPU time per
// streamed token with many concurrent streams over the simulated executor.
//
//	SLUICE_BENCH_STREAMS=1024 go test -run XXX -bench FrontendCPU -benchtime 1x ./api-frontend/e2etest/
//
// SLUICE_BENCH_STREAMS (default 1024), SLUICE_BENCH_STEP_MS (engine step,
// default 20) and SLUICE_BENCH_SECONDS (measured window, default 10) tune it.
// The window starts once every stream is running; tokens are the engine's
// own count of generated tokens over the window.
//
// split/streams=N/interval=I (benchmarkSplit) solves the CPU per request
// and per token from a window of short and one of long outputs:
//
//	SLUICE_BENCH_SECONDS=8 go test -run XXX -bench 'FrontendCPU/split/streams=256/interval=1$' -benchtime 1x ./api-frontend/e2etest/
func BenchmarkFrontendCPU(b *testing.B) {
	streams := envInt("SLUICE_BENCH_STREAMS", 1024)
	stepMS := envInt("SLUICE_BENCH_STEP_MS", 20)
	window := time.Duration(envInt("SLUICE_BENCH_SECONDS", 10)) * time.Second
	for _, iv := range []int{1, 10} {
		b.Run(fmt.Sprintf("streams=%d/interval=%d", streams, iv), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchOnce(b, streams, iv, stepMS, window)
			}
		})
	}
	// The split: CPU per request and per token at SLUICE_BENCH_SPLIT_STREAMS
	// (default 256) streams (benchmarkSplit).
	split := envInt("SLUICE_BENCH_SPLIT_STREAMS", 256)
	for _, iv := range []int{1, 10} {
		b.Run(fmt.Sprintf("split/streams=%d/interval=%d", split, iv), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchmarkSplit(b, split, iv, stepMS, window)
			}
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchOnce(b *testing.B, streams, interval, stepMS int, window time.Duration) {
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
	for {
		if _, ok := conn.Ready(); ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0, DialContext: (&net.Dialer{}).DialContext}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	maxTokens := 2000 // longer than the window at any step time used
	body := fmt.Sprintf(`{"model":"demo","prompt":"benchmark prompt %%d","max_tokens":%d,"ignore_eos":true,"stream":true}`, maxTokens)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(fmt.Sprintf(body, i)))
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.CopyBuffer(io.Discard, resp.Body, make([]byte, 32<<10))
			resp.Body.Close()
		}(i)
	}
	// wait until all streams run
	statsOf := func() (running int32, gen int64) {
		r, err := conn.Call("stats", nil, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		st := decodeStats(b, r.Result)
		return st.Running, st.GeneratedTokens
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if running, _ := statsOf(); int(running) >= streams {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("streams did not all start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // settle
	chunks0 := scrape(b, base, "sluice_frontend_sse_chunks_total")
	user0, sys0, err := procCPUSplit(fe.Cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	_, gen0 := statsOf()
	t0 := time.Now()
	if os.Getenv("SLUICE_BENCH_PPROF") != "" {
		go func() {
			// Profile the window: go tool pprof bin/api-frontend /tmp/sluice-frontend-<interval>.pprof
			r, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", os.Getenv("SLUICE_BENCH_PPROF"), int(window.Seconds())-1))
			if err == nil {
				data, _ := io.ReadAll(r.Body)
				r.Body.Close()
				_ = os.WriteFile(fmt.Sprintf("/tmp/sluice-frontend-%d.pprof", interval), data, 0o644)
			}
		}()
	}
	time.Sleep(window)
	user1, sys1, _ := procCPUSplit(fe.Cmd.Process.Pid)
	_, gen1 := statsOf()
	el := time.Since(t0)
	chunks1 := scrape(b, base, "sluice_frontend_sse_chunks_total")
	cancel()
	wg.Wait()
	tokens := gen1 - gen0
	user, sys := user1-user0, sys1-sys0
	cpu := user + sys
	usPerTok := float64(cpu.Microseconds()) / float64(tokens)
	b.ReportMetric(usPerTok, "cpu-us/token")
	// user space (frontend code, runtime) and kernel (mostly the socket
	// writes) apart: the kernel share varies most with the machine's load.
	b.ReportMetric(float64(user.Microseconds())/float64(tokens), "user-us/token")
	b.ReportMetric(float64(sys.Microseconds())/float64(tokens), "sys-us/token")
	b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
	b.ReportMetric((chunks1-chunks0)/float64(tokens), "chunks/token")
	b.ReportMetric(cpu.Seconds()/el.Seconds(), "frontend-cores")
	b.Logf("streams=%d interval=%d: %d tokens in %s, frontend CPU %s (user %s, sys %s) → %.2f µs/token (user %.2f, sys %.2f), %.3f chunks/token",
		streams, interval, tokens, el.Round(time.Millisecond), cpu, user, sys, usPerTok,
		float64(user.Microseconds())/float64(tokens), float64(sys.Microseconds())/float64(tokens), (chunks1-chunks0)/float64(tokens))
}

func decodeStats(b *testing.B, raw []byte) ipc.SchedulerStats {
	var st ipc.SchedulerStats
	if err := msgpack.Unmarshal(raw, &st); err != nil {
		b.Fatal(err)
	}
	return st
}

func scrape(b *testing.B, base, name string) float64 {
	r, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
			return v
		}
	}
	return 0
}
