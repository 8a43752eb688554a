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
// the host's load.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestLongPromptNextToStreams runs the engine loop over the sim executor
// shaped like the CPU engine's prefill (1 ms per prompt token, so a
// 2000-token prompt alone takes 2 s): four streams decode, a 2000-token
// prompt arrives, and the streams' longest gap between two tokens is
// measured on the simulated clock. With --long-prefill-token-threshold 256
// the gap stays under 300 ms (one 256-token chunk plus the decodes) and the
// long request's time to first token grows by at most 2 %; without it the
// whole prompt is one step and the streams wait about 2 s.
func TestLongPromptNextToStreams(t *testing.T) {
	for _, c := range []struct {
		threshold        int
		gapMin, gapMax   time.Duration
		ttftMin, ttftMax time.Duration
	}{
		{threshold: 0, gapMin: 1900 * time.Millisecond, gapMax: 2100 * time.Millisecond, ttftMin: 1900 * time.Millisecond, ttftMax: 2100 * time.Millisecond},
		{threshold: 256, gapMin: 200 * time.Millisecond, gapMax: 300 * time.Millisecond, ttftMin: 1900 * time.Millisecond, ttftMax: 2100 * time.Millisecond},
	} {
		t.Run(fmt.Sprint("threshold=", c.threshold), func(t *testing.T) {
			gap, ttft := longPromptGap(t, c.threshold)
			t.Logf("streams' longest gap %v, long prompt's time to first token %v", gap, ttft)
			if gap < c.gapMin || gap > c.gapMax {
				t.Errorf("longest gap %v, want %v..%v", gap, c.gapMin, c.gapMax)
			}
			if ttft < c.ttftMin || ttft > c.ttftMax {
				t.Errorf("time to first token %v, want %v..%v", ttft, c.ttftMin, c.ttftMax)
			}
		})
	}
}

// longPromptGap runs the scenario of TestLongPromptNextToStreams and
// returns the streams' longest gap and the long prompt's time to first
// token (from its arrival at the engine to its first output).
func longPromptGap(t *testing.T, threshold int) (gap, ttft time.Duration) {
	t.Helper()
	clk := &virtualClock{now: time.Unix(1000, 0)}
	pool := kvcache.New(1024, 16)
	s := sched.New(sched.Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, EOSTokenIDs: []int32{2},
		LongPrefillTokenThreshold: threshold}, pool)
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
	st.tr.waitFor(t, "the streams to decode", func() bool {
		v := st.tr.view("fe")
		for _, id := range streams {
			if v[id] == nil || len(v[id].tokens) < 3 {
				return false
			}
		}
		return true
	})
	arrived := clk.Now()
	st.tr.in <- add("fe", "long", 2000, 2)
	st.tr.waitFor(t, "the long prompt to finish", func() bool {
		v := st.tr.view("fe")["long"]
		return v != nil && v.finish != ipc.FinishNone
	})
	st.tr.in <- zmqtransport.Inbound{Frontend: "fe", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: streams}}
	st.tr.waitFor(t, "the streams to end", func() bool { return st.tr.stats(t).Running == 0 })

	tr.mu.Lock()
	defer tr.mu.Unlock()
	last := map[string]time.Time{}
	for i, batch := range tr.outs["fe"] {
		at := tr.stamps["fe"][i]
		for _, o := range batch.Outputs {
			if o.RequestID == "long" {
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
