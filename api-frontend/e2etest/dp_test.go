package e2etest

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// TestDataParallel runs one frontend over two engines: requests spread over
// both, and killing one fails only the streams it was serving.
func TestDataParallel(t *testing.T) {
	addrA, addrB := engineAddr(t), engineAddr(t)
	startEngine(t, addrA, "--sim-step-ms", "5")
	engB := startEngine(t, addrB, "--sim-step-ms", "5")
	base, _ := startFrontend(t, addrA+","+addrB, "--engine-liveness-timeout", "2s")
	observe := func(addr string) *zmqtransport.EngineConn {
		c, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: "dp-observer-" + addr[len(addr)-12:]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, ok := c.Ready(); ok {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatal("observer not ready")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	obsA, obsB := observe(addrA), observe(addrB)

	const n = 8
	type result struct {
		evs []string
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"dp","max_tokens":400,"ignore_eos":true,"stream":true}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			results[i].evs = sse(t, bufio.NewReader(resp.Body))
		}(i)
		time.Sleep(30 * time.Millisecond) // let stats/local accounting see each add
	}
	// Wait until the engines run all n (polled, not after a fixed 200 ms: a
	// request can take longer to arrive on a loaded machine); each stream
	// lasts 2 s (400 tokens at 5 ms), so none has finished within 1.5 s.
	var ra, rb int32
	for deadline := time.Now().Add(1500 * time.Millisecond); ; time.Sleep(10 * time.Millisecond) {
		ra, rb = engineStats(t, obsA).Running, engineStats(t, obsB).Running
		if ra+rb == n || time.Now().After(deadline) {
			break
		}
	}
	if ra+rb != n || ra < 2 || rb < 2 {
		t.Fatalf("requests not spread: engine A runs %d, engine B %d", ra, rb)
	}
	engB.Kill()
	wg.Wait()
	failed, ok := 0, 0
	for _, r := range results {
		if len(r.evs) < 2 || r.evs[len(r.evs)-1] != "[DONE]" {
			t.Fatalf("stream without [DONE]: %q", r.evs)
		}
		if strings.Contains(r.evs[len(r.evs)-2], `"error"`) {
			failed++
		} else if strings.Contains(r.evs[len(r.evs)-2], `"finish_reason":"length"`) {
			ok++
		}
	}
	if failed != int(rb) || ok != int(ra) {
		t.Fatalf("%d streams failed and %d finished; engine B had %d, engine A %d", failed, ok, rb, ra)
	}
	waitHealth(t, base, http.StatusOK, time.Second) // engine A still serves
	evs := rawStream(t, base, "/v1/completions", `{"prompt":"after","max_tokens":3,"stream":true}`)
	if _, _, _, finish, _ := collect(t, evs); finish != "length" {
		t.Fatalf("request after losing engine B: finish %q", finish)
	}
}
