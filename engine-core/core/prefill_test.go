package core

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/engine-core/simexec"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// virtualClock is the sim executor's clock in TestLongPromptNextToStreams:
// a step's simulated time passes at once, so the figures do not depend on
// the host's load. Once the clock reaches holdAt, the step sleeping holds
// (held is closed) until release is closed, so the test can queue requests
// at a known simulated time.
type virtualClock struct {
	mu      sync.Mutex
	now     time.Time
	holdAt  time.Time
	held    chan struct{}
	release chan struct{}
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	hold := !c.holdAt.IsZero() && !c.now.Before(c.holdAt)
	if hold {
		c.holdAt = time.Time{}
	}
	c.mu.Unlock()
	if hold {
		close(c.held)
		<-c.release
	}
}

// TestLongPromptNextToStreams runs the engine loop over the sim executor
// shaped like the CPU engine's prefill (1 ms per prompt token, so a
// 2000-token prompt alone takes 2 s): four streams decode, a 2000-token
// prompt arrives, and the streams' longest gap between two tokens is
// measured on the simulated clock. With --long-prefill-token-threshold 256
// the gap stays under 300 ms (one 256-token chunk plus the decodes) and the
// long request's time to first token grows by at most 2 %; without it the
// whole prompt is one step and the streams wait about 2 s.
//
// The same with a burst of eight 200-token prompts instead (1600 tokens):
// the threshold alone does not cut it (each prompt is under 256 tokens);
// --prefill-tokens-beside-decodes 256 does.
func TestLongPromptNextToStreams(t *testing.T) {
	long, burst := []int{2000}, []int{200, 200, 200, 200, 200, 200, 200, 200}
	for _, c := range []struct {
		name              string
		prompts           []int
		threshold, beside int
		gapMin, gapMax    time.Duration
		ttftMin, ttftMax  time.Duration
	}{
		{"long/none", long, 0, 0, 1900 * time.Millisecond, 2100 * time.Millisecond, 1900 * time.Millisecond, 2100 * time.Millisecond},
		{"long/threshold", long, 256, 0, 200 * time.Millisecond, 300 * time.Millisecond, 1900 * time.Millisecond, 2100 * time.Millisecond},
		{"long/both", long, 256, 256, 200 * time.Millisecond, 300 * time.Millisecond, 1900 * time.Millisecond, 2100 * time.Millisecond},
		{"burst/threshold", burst, 256, 0, 1500 * time.Millisecond, 1700 * time.Millisecond, 1500 * time.Millisecond, 1700 * time.Millisecond},
		{"burst/both", burst, 256, 256, 200 * time.Millisecond, 300 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			gap, ttft := longPromptGap(t, c.threshold, c.beside, c.prompts)
			t.Logf("streams' longest gap %v, the new prompts' first time to first token %v", gap, ttft)
			if gap < c.gapMin || gap > c.gapMax {
				t.Errorf("longest gap %v, want %v..%v", gap, c.gapMin, c.gapMax)
			}
			if ttft < c.ttftMin || ttft > c.ttftMax {
				t.Errorf("time to first token %v, want %v..%v", ttft, c.ttftMin, c.ttftMax)
			}
		})
	}
}

// longPromptGap runs the scenario of TestLongPromptNextToStreams with new
// prompts of the given lengths, and returns the streams' longest gap and
// the earliest time to first token of the new prompts (from their arrival
// to their first output).
func longPromptGap(t *testing.T, threshold, beside int, prompts []int) (gap, ttft time.Duration) {
	t.Helper()
	clk := &virtualClock{now: time.Unix(1000, 0), held: make(chan struct{}), release: make(chan struct{})}
	clk.holdAt = clk.now.Add(100 * time.Millisecond) // the streams prefilled and decoding
	pool := kvcache.New(1024, 16)
	s := sched.New(sched.Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, EOSTokenIDs: []int32{2},
		LongPrefillTokenThreshold: threshold, PrefillTokensBesideDecodes: beside}, pool)
	ex, err := simexec.New(simexec.Config{VocabSize: 1000, TokenMin: 10, TokenMax: 999, EOSTokenIDs: []int32{2},
		StepTime: time.Millisecond, PrefillPerToken: time.Millisecond, DecodePerToken: 100 * time.Microsecond,
		Now: clk.Now, Sleep: clk.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	tr := newFake()
	tr.clock = clk.Now
	st := run(t, Options{EngineID: "e1", Sched: s, Exec: ex, Transport: tr, DrainTimeout: time.Second})
	streams := []string{"s0", "s1", "s2", "s3"}
	for _, id := range streams {
		st.tr.in <- add("fe", id, 16, 3000)
	}
	select {
	case <-clk.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not reach the hold")
	}
	arrived := clk.Now()
	isNew := map[string]bool{}
	for i, n := range prompts {
		id := fmt.Sprint("new", i)
		isNew[id] = true
		st.tr.in <- add("fe", id, n, 2)
	}
	close(clk.release) // the step ends and the loop receives them
	st.tr.waitFor(t, "the new prompts to finish", func() bool {
		v := st.tr.view("fe")
		for id := range isNew {
			if v[id] == nil || v[id].finish == ipc.FinishNone {
				return false
			}
		}
		return true
	})
	st.tr.in <- zmqtransport.Inbound{Frontend: "fe", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: streams}}
	st.tr.waitFor(t, "the streams to end", func() bool { return st.tr.stats(t).Running == 0 })

	tr.mu.Lock()
	defer tr.mu.Unlock()
	last := map[string]time.Time{}
	for i, batch := range tr.outs["fe"] {
		at := tr.stamps["fe"][i]
		for _, o := range batch.Outputs {
			if isNew[o.RequestID] {
				if ttft == 0 {
					ttft = at.Sub(arrived)
				}
				continue
			}
			if p, ok := last[o.RequestID]; ok {
				gap = max(gap, at.Sub(p))
			}
			last[o.RequestID] = at
		}
	}
	return gap, ttft
}
