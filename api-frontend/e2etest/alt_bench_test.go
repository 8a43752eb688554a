package e2etest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ssend "github.com/sluice-llm/sluice/api-frontend/sse"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// BenchmarkFrontendAlt measures the frontend's CPU per request and per
// streamed token finely enough to resolve a few µs per request between
// builds. The same streams alternate short-output and long-output phases
// within one run (SLUICE_BENCH_ALT_ROUNDS rounds of one short and one long
// phase); each round's two phases solve cpu = a·requests + b·tokens as the
// split does (benchmarkSplit), and the reported figures are the medians
// over the rounds, so a burst of other load spoils one round, not the run.
// Compared with the split:
//
//   - the short requests ask for 2 tokens (SLUICE_BENCH_SHORT_TOKENS), so
//     the per-request path is most of a short phase's CPU and the per-token
//     figure's noise carries over twice, not sixteen times;
//
//   - the long requests ask for 64 (SLUICE_BENCH_LONG_TOKENS), so the
//     streams turn back to short requests within 1.3 s;
//
//   - the frontend's CPU is the sum of its threads' on-CPU time from
//     /proc/<pid>/task/*/schedstat (ns), not /proc/<pid>/stat's 10 ms ticks;
//
//   - the clients are raw keep-alive TCP connections, one goroutine each,
//     writing a preformatted request and reading until the chunked body's
//     terminator: the load generator competes for the two cores with far
//     less CPU than net/http's client.
//
//     SLUICE_E2E_BIN=bin SLUICE_BENCH_SECONDS=3 go test -run XXX -bench 'FrontendAlt/streams=256/interval=1$' -benchtime 1x ./api-frontend/e2etest/
//
// SLUICE_BENCH_SECONDS is each phase's window (default 3 s here). After
// the rounds, with the clients stopped, the same run measures the send
// floor under the per-token figure (BenchmarkSendFloor's paced mode:
// SLUICE_BENCH_ALT_FLOOR rounds, default 200, of one 150-byte send(2) to
// each of 256 loopback connections): floor-cpu-us/send; and, where
// io_uring works, the same rounds as one io_uring_enter each (its uring
// mode, the frontend's default way to send a step's chunks):
// floor-uring-cpu-us/send. The frontend's own batched sends are counted
// in the same rounds (sluice_frontend_send_batch_cpu_seconds_total, the
// sending thread's CPU clock around each step's io_uring_enter):
// send-cpu-us/token is the long phase's send CPU per token and
// rest-cpu-us/token the per-token figure less it (everything but the
// kernel's send); long-cpu-us/token is the long phase's own CPU per token
// (its requests' intake included).
//
// Profiles of the first long phase (the per-token path), for reading, not
// for figures (profiling costs CPU of its own): SLUICE_BENCH_PPROF=ADDR
// serves the frontend's pprof there and saves a CPU profile and an
// allocation (delta) profile of the phase to
// /tmp/sluice-frontend-alt-long-<interval>.{pprof,allocs};
// SLUICE_BENCH_PERF=PATH records the frontend's threads with perf's
// software cpu-clock event and call graphs, kernel stacks included (what
// pprof shows as one system call), to PATH (perf report -i PATH).
// SLUICE_BENCH_SWITCHES=1 logs, for every phase, each frontend thread's CPU
// time and voluntary/involuntary context switches per engine step (from
// /proc/PID/task/*/{schedstat,status}), to price the hand-offs per step.
func BenchmarkFrontendAlt(b *testing.B) {
	streams := envInt("SLUICE_BENCH_SPLIT_STREAMS", 256)
	stepMS := envInt("SLUICE_BENCH_STEP_MS", 20)
	window := time.Duration(envInt("SLUICE_BENCH_SECONDS", 3)) * time.Second
	rounds := envInt("SLUICE_BENCH_ALT_ROUNDS", 6)
	for _, iv := range []int{1, 10} {
		b.Run(fmt.Sprintf("streams=%d/interval=%d", streams, iv), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchmarkAlt(b, streams, iv, stepMS, rounds, window)
			}
		})
	}
}

// altRequest is the raw HTTP/1.1 request a client of benchmarkAlt sends.
func altRequest(prompt string, maxTokens int) []byte {
	body := fmt.Sprintf(`{"model":"demo","prompt":%q,"max_tokens":%d,"ignore_eos":true,"stream":true}`, prompt, maxTokens)
	return fmt.Appendf(nil, "POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body)
}

// chunkedEnd is how a chunked response body ends (the last chunk, no
// trailers) when the chunk before it ends a line.
var chunkedEnd = []byte("\r\n0\r\n\r\n")

// bodyEnd tracks a streamed response read in pieces: it checks the status
// line and reports when the chunked body's terminator has arrived.
type bodyEnd struct {
	tail   [7]byte // the last bytes read so far (len(chunkedEnd))
	n      int     // how many of tail are valid
	status int     // how many bytes of statusOK have been checked
}

// statusOK is how a response benchmarkAlt accepts begins.
const statusOK = "HTTP/1.1 200 "

// reset starts a new response.
func (e *bodyEnd) reset() { e.n, e.status = 0, 0 }

// feed takes the next bytes of the response; done reports the end of its
// body. A status other than 200 is an error. The server sends nothing
// after the terminator until the next request, so the terminator ends the
// piece that completes it.
func (e *bodyEnd) feed(p []byte) (done bool, err error) {
	if e.status < len(statusOK) {
		k := min(len(p), len(statusOK)-e.status)
		if string(p[:k]) != statusOK[e.status:e.status+k] {
			return false, fmt.Errorf("response %q", p[:min(len(p), 64)])
		}
		e.status += k
	}
	var last []byte
	if len(p) >= len(e.tail) {
		last = p[len(p)-len(e.tail):]
	} else {
		last = append(append(make([]byte, 0, 2*len(e.tail)), e.tail[:e.n]...), p...)
		last = last[max(0, len(last)-len(e.tail)):]
	}
	e.n = copy(e.tail[:], last)
	return bytes.Equal(e.tail[:e.n], chunkedEnd), nil
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 1 {
		return xs[n/2]
	} else {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
}

func benchmarkAlt(b *testing.B, streams, interval, stepMS, rounds int, window time.Duration) {
	const promptTokens = 32
	short, long := envInt("SLUICE_BENCH_SHORT_TOKENS", 2), envInt("SLUICE_BENCH_LONG_TOKENS", 64)
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
	shortReq := altRequest(prompt, short)
	longReqs := make([][]byte, long-short+1) // every length a first long request may draw
	for n := short; n <= long; n++ {
		longReqs[n-short] = altRequest(prompt, n)
	}

	var phase atomic.Int64 // max_tokens of the requests clients start now
	phase.Store(int64(short))
	var started, finished, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var conns sync.Map
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			fail := func(err error) {
				if ctx.Err() == nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				fail(err)
				return
			}
			conns.Store(c, nil)
			defer c.Close()
			rng := rand.New(rand.NewPCG(seed, 1))
			buf := make([]byte, 32<<10)
			var end bodyEnd
			last := short
			for ctx.Err() == nil {
				n := int(phase.Load())
				req := shortReq
				if n != short {
					// The first long request of each client has a random
					// length, so that long requests end all through the
					// phase rather than all at once.
					if last != n {
						req = longReqs[rng.IntN(len(longReqs))]
					} else {
						req = longReqs[len(longReqs)-1]
					}
				}
				last = n
				started.Add(1)
				if _, err := c.Write(req); err != nil {
					fail(err)
					return
				}
				end.reset()
				for {
					k, err := c.Read(buf)
					if err != nil {
						fail(err)
						return
					}
					done, err := end.feed(buf[:k])
					if err != nil {
						fail(err)
						return
					}
					if done {
						break
					}
				}
				finished.Add(1)
			}
		}(uint64(i))
	}
	stopClients := sync.OnceFunc(func() {
		cancel()
		conns.Range(func(c, _ any) bool { _ = c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	defer stopClients()

	pid := fe.Cmd.Process.Pid
	// SLUICE_BENCH_SWITCHES: log each thread's CPU and switches per step.
	switches := os.Getenv("SLUICE_BENCH_SWITCHES") != ""
	profiled := false // the first long phase is profiled (profileLong)
	measure := func(name string, maxTokens int, settle time.Duration) splitPhase {
		phase.Store(int64(maxTokens))
		time.Sleep(settle)
		c0, err := threadsCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		u0, s0, err := procCPUSplit(pid)
		if err != nil {
			b.Fatal(err)
		}
		m0 := scrape(b, base, "go_memstats_mallocs_total")
		sc0 := scrape(b, base, "sluice_frontend_send_batch_cpu_seconds_total")
		if name == "long" && !profiled {
			profiled = true
			profileLong(pid, interval, window)
		}
		var sw0 map[int]threadStat
		if switches {
			sw0, _ = threadStats(pid)
		}
		st0, fi0, g0 := started.Load(), finished.Load(), generated()
		t0 := time.Now()
		time.Sleep(window)
		if switches {
			if sw1, err := threadStats(pid); err == nil {
				logSwitches(b, name, sw0, sw1, float64(time.Since(t0))/float64(time.Duration(stepMS)*time.Millisecond))
			}
		}
		c1, _ := threadsCPU(pid)
		u1, s1, _ := procCPUSplit(pid)
		st1, fi1, g1 := started.Load(), finished.Load(), generated()
		m1 := scrape(b, base, "go_memstats_mallocs_total")
		sc1 := scrape(b, base, "sluice_frontend_send_batch_cpu_seconds_total")
		return splitPhase{sendCPU: (sc1 - sc0) * 1e6, name: name, maxTokens: maxTokens, cpu: c1 - c0, user: u1 - u0, sys: s1 - s0, tokens: g1 - g0,
			requests: float64(st1-st0+fi1-fi0) / 2, elapsed: time.Since(t0), mallocs: m1 - m0}
	}
	// Settling: a short phase waits for the long requests before it to end
	// (long steps), a long phase for the short ones (short steps); both
	// with a margin for prefill and the clients' turnaround.
	stepD := time.Duration(stepMS) * time.Millisecond
	settleShort := time.Duration(long+4)*stepD + 300*time.Millisecond
	settleLong := time.Duration(short+4)*stepD + 300*time.Millisecond
	var perReq, perTok, userReq, sysReq, userTok, sysTok, allIn, rate, allocReq, allocTok, sendTok, restTok, longTok []float64
	for r := 0; r < rounds; r++ {
		settle := settleShort
		if r == 0 {
			settle = time.Second // the clients start with short requests
		}
		sp := measure("short", short, settle)
		lp := measure("long", long, settleLong)
		if n := failed.Load(); n > 0 {
			b.Fatalf("%d requests failed; first: %v", n, firstErr.Load())
		}
		if sp.tokens == 0 || lp.tokens == 0 || sp.requests == 0 {
			b.Fatalf("nothing measured: short %+v long %+v", sp, lp)
		}
		a, t := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.cpu })
		ua, ut := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.user })
		sa, st := solveSplit(sp, lp, func(p splitPhase) time.Duration { return p.sys })
		perReq, perTok = append(perReq, a), append(perTok, t)
		userReq, sysReq, userTok, sysTok = append(userReq, ua), append(sysReq, sa), append(userTok, ut), append(sysTok, st)
		ma, mt := solveSplitF(sp, lp, func(p splitPhase) float64 { return p.mallocs })
		allocReq, allocTok = append(allocReq, ma), append(allocTok, mt)
		// The batched sends are per token: the long phase's send CPU per
		// token, and what the frontend spends per token besides.
		longTok = append(longTok, float64(lp.cpu.Nanoseconds())/1e3/float64(lp.tokens))
		if lp.sendCPU > 0 {
			st := lp.sendCPU / float64(lp.tokens)
			sendTok, restTok = append(sendTok, st), append(restTok, t-st)
		}
		allIn = append(allIn, float64(sp.cpu.Nanoseconds())/1e3/sp.requests)
		rate = append(rate, sp.requests/sp.elapsed.Seconds())
		b.Logf("round %d: short %.0f requests, %d tokens, CPU %s; long %.0f requests, %d tokens, CPU %s → %.1f µs/request + %.2f µs/token",
			r, sp.requests, sp.tokens, sp.cpu.Round(time.Millisecond), lp.requests, lp.tokens, lp.cpu.Round(time.Millisecond), a, t)
	}
	stopClients()
	floor := measureSendFloor(b, "paced", envInt("SLUICE_BENCH_ALT_FLOOR", 200))
	b.ReportMetric(floor.cpu, "floor-cpu-us/send")
	b.ReportMetric(floor.sys, "floor-sys-us/send")
	if ring, err := ssend.NewBatch(1); err == nil {
		ring.Close()
		uf := measureSendFloor(b, "uring", envInt("SLUICE_BENCH_ALT_FLOOR", 200))
		b.ReportMetric(uf.cpu, "floor-uring-cpu-us/send")
	}
	lo, hi := slices.Min(perReq), slices.Max(perReq)
	b.ReportMetric(median(perReq), "cpu-us/request")
	b.ReportMetric(lo, "min-cpu-us/request")
	b.ReportMetric(hi, "max-cpu-us/request")
	b.ReportMetric(median(perTok), "cpu-us/token")
	b.ReportMetric(median(longTok), "long-cpu-us/token")
	if len(sendTok) > 0 {
		b.ReportMetric(median(sendTok), "send-cpu-us/token")
		b.ReportMetric(median(restTok), "rest-cpu-us/token")
	}
	b.ReportMetric(median(userReq), "user-us/request")
	b.ReportMetric(median(sysReq), "sys-us/request")
	b.ReportMetric(median(userTok), "user-us/token")
	b.ReportMetric(median(sysTok), "sys-us/token")
	b.ReportMetric(median(allIn), "short-cpu-us/request")
	b.ReportMetric(median(rate), "short-requests/s")
	// Allocations: each phase's /metrics scrape adds its own (the same in
	// both phases), ≈ 0.1 per request here.
	b.ReportMetric(median(allocReq), "allocs/request")
	b.ReportMetric(median(allocTok), "allocs/token")
}

// profileLong starts the profiles of a long phase of window that the
// environment asks for (see BenchmarkFrontendAlt); each runs in the
// background and ends by itself within the window.
func profileLong(pid, interval int, window time.Duration) {
	if addr := os.Getenv("SLUICE_BENCH_PPROF"); addr != "" {
		go saveProfile(addr, window, fmt.Sprintf("/tmp/sluice-frontend-alt-long-%d.pprof", interval))
		go saveAllocs(addr, window, fmt.Sprintf("/tmp/sluice-frontend-alt-long-%d.allocs", interval))
	}
	if path := os.Getenv("SLUICE_BENCH_PERF"); path != "" {
		secs := strconv.Itoa(max(int(window.Seconds())-1, 1))
		cmd := exec.Command("perf", "record", "-F", "2000", "-e", "cpu-clock", "-g", "-p", strconv.Itoa(pid), "-o", path, "--", "sleep", secs)
		if err := cmd.Start(); err == nil {
			go func() { _ = cmd.Wait() }()
		}
	}
}

// saveAllocs saves the allocations of the next window (a delta profile)
// from the frontend's pprof address to path: go tool pprof -sample_index
// alloc_objects bin/api-frontend path.
func saveAllocs(addr string, window time.Duration, path string) {
	r, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/allocs?seconds=%d", addr, max(int(window.Seconds())-1, 1)))
	if err != nil {
		return
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	_ = os.WriteFile(path, data, 0o644)
}
