package e2etest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// dialObserver connects to an engine as an extra frontend that only asks
// for stats.
func dialObserver(t *testing.T, addr, id string) *zmqtransport.EngineConn {
	t.Helper()
	c, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := c.Ready(); ok {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("observer of %s not ready", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamOutcome classifies a finished SSE stream: "ok" (ends with a
// finish_reason length chunk, usage and [DONE]), "error" (an error event
// then [DONE]) or a description of what is wrong.
func streamOutcome(evs []string) string {
	if len(evs) < 2 || evs[len(evs)-1] != "[DONE]" {
		return fmt.Sprintf("no [DONE]: %q", evs)
	}
	last := evs[len(evs)-2]
	var c streamChunk
	if err := json.Unmarshal([]byte(last), &c); err != nil {
		return fmt.Sprintf("bad chunk %q", last)
	}
	if c.Error != nil {
		for _, e := range evs[:len(evs)-2] {
			if strings.Contains(e, `"error"`) || strings.Contains(e, `"finish_reason":"`) {
				return fmt.Sprintf("error stream has an earlier error or finish: %q", e)
			}
		}
		return "error"
	}
	for _, e := range evs[:len(evs)-1] {
		if strings.Contains(e, `"finish_reason":"length"`) {
			return "ok"
		}
	}
	return fmt.Sprintf("stream neither finished nor failed: %q", tail(strings.Join(evs, "\n"), 400))
}

// runStreams starts n streaming completions at once and returns each one's
// SSE payloads once all have ended.
func runStreams(t *testing.T, base, body string, n int, started *sync.WaitGroup) [][]string {
	t.Helper()
	out := make([][]string, n)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
			if started != nil {
				started.Done()
			}
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: status %d", i, resp.StatusCode)
				return
			}
			out[i] = sse(t, bufio.NewReader(resp.Body))
		}()
	}
	wg.Wait()
	return out
}

// TestDP200 is issue 9's done-when: one frontend over two engines spreads
// 200 concurrent streams 30–70% per engine and completes them all; killing
// one engine with 40 streams open fails exactly its streams (error event
// and [DONE]) while the survivor's complete, and new requests all go to
// the survivor and succeed.
func TestDP200(t *testing.T) {
	addrA, addrB := engineAddr(t), engineAddr(t)
	startEngine(t, addrA, "--sim-step-ms", "5")
	engB := startEngine(t, addrB, "--sim-step-ms", "5")
	base, _ := startFrontend(t, addrA+","+addrB, "--engine-liveness-timeout", "2s")
	waitEnginesUp(t, base, 2, 30*time.Second)
	obsA, obsB := dialObserver(t, addrA, "dp200-observer-a"), dialObserver(t, addrB, "dp200-observer-b")

	// 200 concurrent streams
	a0, b0 := engineStats(t, obsA).FinishedRequests, engineStats(t, obsB).FinishedRequests
	const n = 200
	t0 := time.Now()
	res := runStreams(t, base, `{"prompt":"dp200","max_tokens":24,"ignore_eos":true,"stream":true}`, n, nil)
	for i, evs := range res {
		if o := streamOutcome(evs); o != "ok" {
			t.Fatalf("stream %d: %s", i, o)
		}
		if text, _, _, _, _ := collect(t, evs); text == "" {
			t.Fatalf("stream %d: no text", i)
		}
	}
	fa, fb := engineStats(t, obsA).FinishedRequests-a0, engineStats(t, obsB).FinishedRequests-b0
	t.Logf("%d streams in %v: engine A finished %d, engine B %d", n, time.Since(t0).Round(time.Millisecond), fa, fb)
	if fa+fb != n || fa < n*30/100 || fa > n*70/100 {
		t.Fatalf("engine A finished %d and engine B %d of %d requests: want each 30–70%%", fa, fb, n)
	}

	// 40 long streams, then engine B dies
	const open = 40
	var started sync.WaitGroup
	started.Add(open)
	done := make(chan [][]string)
	go func() {
		done <- runStreams(t, base, `{"prompt":"dp200 kill","max_tokens":400,"ignore_eos":true,"stream":true}`, open, &started)
	}()
	started.Wait()
	var ra, rb int32
	for deadline := time.Now().Add(10 * time.Second); ; {
		ra, rb = engineStats(t, obsA).Running, engineStats(t, obsB).Running
		if ra+rb == open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams running (A %d, B %d)", ra+rb, open, ra, rb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ra < open*30/100 || rb < open*30/100 {
		t.Fatalf("open streams not spread: engine A runs %d, engine B %d", ra, rb)
	}
	aBefore := engineStats(t, obsA).FinishedRequests
	engB.Kill()
	killed := time.Now()
	res = <-done
	failed, ok := 0, 0
	for i, evs := range res {
		switch o := streamOutcome(evs); o {
		case "ok":
			ok++
		case "error":
			failed++
		default:
			t.Fatalf("stream %d after the kill: %s", i, o)
		}
	}
	t.Logf("after SIGKILL of engine B (running %d; A running %d): %d streams failed, %d finished, all ended %v after the kill",
		rb, ra, failed, ok, time.Since(killed).Round(time.Millisecond))
	if failed != int(rb) || ok != int(ra) {
		t.Fatalf("%d streams failed and %d finished; engine B had %d, engine A %d", failed, ok, rb, ra)
	}
	if got := engineStats(t, obsA).FinishedRequests - aBefore; got != int64(ra) {
		t.Fatalf("engine A finished %d requests during the kill, want its %d", got, ra)
	}

	// new requests all go to the survivor and succeed
	waitHealth(t, base, http.StatusOK, time.Second)
	aBefore = engineStats(t, obsA).FinishedRequests
	const after = 30
	res = runStreams(t, base, `{"prompt":"dp200 after","max_tokens":8,"ignore_eos":true,"stream":true}`, after, nil)
	for i, evs := range res {
		if o := streamOutcome(evs); o != "ok" {
			t.Fatalf("request %d after losing engine B: %s", i, o)
		}
	}
	if got := engineStats(t, obsA).FinishedRequests - aBefore; got != after {
		t.Fatalf("engine A finished %d of the %d requests sent after the kill", got, after)
	}
}

// waitEnginesUp waits until the frontend at base reports n engines up
// (sluice_frontend_engine_up in /metrics): /health turns 200 as soon as one
// engine is up, so a test that needs every engine waits for this.
func waitEnginesUp(t *testing.T, base string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	up := 0
	for time.Now().Before(deadline) {
		up = 0
		if resp, err := http.Get(base + "/metrics"); err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "sluice_frontend_engine_up{") && strings.HasSuffix(line, " 1") {
					up++
				}
			}
			resp.Body.Close()
		}
		if up >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%d of %d engines up after %v", up, n, timeout)
}
