package reliability

import (
	"context"
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

// resources is a frontend's goroutines (go_goroutines) and open fds
// (/proc/<pid>/fd).
type resources struct{ goroutines, fds int }

func frontendResources(t testing.TB, fe *frontend) resources {
	t.Helper()
	m, err := metrics(fe.base)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := metric(m, "go_goroutines")
	if !ok {
		t.Fatal("/metrics has no go_goroutines")
	}
	fds, err := openFDs(fe.Pid())
	if err != nil {
		t.Fatal(err)
	}
	return resources{goroutines: int(g), fds: fds}
}

// waitBaseline waits until the frontend's goroutines and fds are back to
// base (a small slack for the scrape's own connection).
func waitBaseline(t testing.TB, fe *frontend, base resources, timeout time.Duration) resources {
	t.Helper()
	var now resources
	waitFor(t, timeout, "frontend goroutines and fds back to baseline", func() (bool, string) {
		now = frontendResources(t, fe)
		return now.goroutines <= base.goroutines+2 && now.fds <= base.fds+1, fmt.Sprintf("now %+v, baseline %+v", now, base)
	})
	return now
}

// stormClient runs one streaming request that disconnects at a random point:
// before the response, after a random number of events, after a random
// delay mid-stream, or never (reads to the end).
func stormClient(ctx context.Context, base string, rng *rand.Rand, hc *http.Client) (completed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	iv := []int{1, 4, 16}[rng.IntN(3)]
	maxTokens := 20 + rng.IntN(300)
	path, body := "/v1/completions", fmt.Sprintf(`{"model":"demo","prompt":"storm %d","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_interval":%d}`, rng.IntN(1000), maxTokens, iv)
	if rng.IntN(4) == 0 {
		path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":"storm %d"}],"max_tokens":%d,"ignore_eos":true,"stream":true,"stream_interval":%d}`, rng.IntN(1000), maxTokens, iv)
	}
	mode := rng.IntN(10)
	if mode == 0 {
		// Gone before the response headers.
		time.AfterFunc(time.Duration(rng.IntN(5))*time.Millisecond, cancel)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	sse := newSSE(resp.Body)
	switch {
	case mode <= 4: // after k events
		k := rng.IntN(maxTokens / iv)
		for i := 0; i < k; i++ {
			if _, err := sse.next(); err != nil {
				break
			}
		}
		return false, nil
	case mode <= 7: // after a delay, reading meanwhile
		time.AfterFunc(time.Duration(rng.IntN(400))*time.Millisecond, cancel)
		_, _ = sse.all()
		return false, nil
	default: // to the end
		evs, err := sse.all()
		if err != nil {
			return false, fmt.Errorf("read: %w", err)
		}
		r, err := summarize(evs)
		if err != nil {
			return false, err
		}
		if !r.done || r.errAt >= 0 || r.finish != "length" {
			return false, fmt.Errorf("full stream: done %v error %q finish %q", r.done, r.errMsg, r.finish)
		}
		return true, nil
	}
}

// TestDisconnectStorm: 1000 streaming clients that vanish at random points
// leave the engine with 0 running requests and 0 KV blocks, and the
// frontend with its baseline goroutines and fds.
func TestDisconnectStorm(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 300
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "2")
	fe := startFrontend(t, addr)
	obs := newObserver(t, addr)
	checkServes(t, fe.base) // warm up lazily created state
	client.CloseIdleConnections()
	base := frontendResources(t, fe)

	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, MaxConnsPerHost: 0}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var completed, failed atomic.Int64
	var firstErr atomic.Value
	peak := 0
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			ok, err := stormClient(ctx, fe.base, rng, hc)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
			if ok {
				completed.Add(1)
			}
		}(uint64(i))
		if i%100 == 99 {
			if st, err := obs.stats(); err == nil && int(st.Running+st.Waiting) > peak {
				peak = int(st.Running + st.Waiting)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	hc.CloseIdleConnections()
	stormTook := time.Since(t0)
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d storm clients failed; first: %v", f, n, firstErr.Load())
	}
	idle, st := obs.waitIdle(t, 5*time.Second)
	after := waitBaseline(t, fe, base, 10*time.Second)
	m, err := metrics(fe.base)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := metric(m, "sluice_frontend_streams_open"); v != 0 {
		t.Errorf("sluice_frontend_streams_open = %v after the storm", v)
	}
	if !fe.Alive() {
		t.Fatal("frontend died")
	}
	checkServes(t, fe.base)
	t.Logf("%d clients (%d read to the end) in %s, engine peak %d running+waiting; idle %s after the last client; goroutines %d→%d, fds %d→%d; engine finished %d requests",
		n, completed.Load(), stormTook.Round(time.Millisecond), peak, idle.Round(time.Millisecond), base.goroutines, after.goroutines, base.fds, after.fds, st.FinishedRequests)
	record(t, "storm clients", n)
	record(t, "storm engine idle after", idle)
}
