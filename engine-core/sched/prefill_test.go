package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// prefillCase is one scenario of TestPrefillLimits: requests that run
// (admitted and decoding) before the step checked, requests that then
// wait, and the step's plan as "id:tokens" per scheduled request.
type prefillCase struct {
	name                     string
	budget, threshold        int
	partial, long            int
	beside                   int      // PrefillTokensBesideDecodes
	running                  []int    // prompts computed and decoding before the checked step
	waiting                  []int    // prompts queued before the checked step
	sharedPrefix             int      // leading tokens of every waiting prompt shared with a computed request
	steps                    int      // steps before the checked one (after the waiting requests arrive)
	want                     []string // the checked step: "id:n" in batch order
	wantThreshold, wantLimit int      // effective Config (0: not checked)
}

// TestPrefillLimits checks --long-prefill-token-threshold,
// --prefill-tokens-beside-decodes and --max-num-partial-prefills /
// --max-long-partial-prefills: decodes go first, a request's chunk is
// capped at the threshold, a step with decodes computes at most the
// beside-decodes cap of prompt tokens in all, concurrent partial
// prefills share the budget, long prompts beyond the long limit wait while
// shorter ones pass them, and prefix-cache hits count from the cached
// prefix. Requests are named r0, r1, … in the order running then waiting.
func TestPrefillLimits(t *testing.T) {
	for _, c := range []prefillCase{
		{name: "no threshold: a long prompt takes the budget left after the decodes",
			budget: 2048, running: []int{8, 8, 8, 8}, waiting: []int{2000},
			want: []string{"r0:1", "r1:1", "r2:1", "r3:1", "r4:2000"}},
		{name: "threshold: the long prompt advances one chunk per step next to the decodes",
			budget: 2048, threshold: 256, running: []int{8, 8, 8, 8}, waiting: []int{2000},
			want: []string{"r0:1", "r1:1", "r2:1", "r3:1", "r4:256"}},
		{name: "threshold: later chunks are capped too",
			budget: 2048, threshold: 256, running: []int{8, 8}, waiting: []int{2000}, steps: 3,
			want: []string{"r0:1", "r1:1", "r2:256"}},
		{name: "threshold: the last chunk is what is left",
			budget: 2048, threshold: 256, running: []int{8}, waiting: []int{600}, steps: 2,
			want: []string{"r0:1", "r1:88"}},
		{name: "threshold: short prompts are whole, several per step",
			budget: 2048, threshold: 256, waiting: []int{128, 128, 128},
			want: []string{"r0:128", "r1:128", "r2:128"}},
		{name: "threshold above the budget: the budget cuts",
			budget: 100, threshold: 256, running: []int{8, 8}, waiting: []int{2000},
			want: []string{"r0:1", "r1:1", "r2:98"}},
		{name: "decodes first even when the budget is short",
			budget: 4, threshold: 256, running: []int{8, 8, 8}, waiting: []int{50},
			want: []string{"r0:1", "r1:1", "r2:1", "r3:1"}},
		{name: "prefix-cache hit: the chunk counts from the cached prefix",
			budget: 2048, threshold: 64, running: []int{200}, waiting: []int{232}, sharedPrefix: 192,
			want: []string{"r0:1", "r1:40"}},
		{name: "beside decodes: a burst of short prompts next to the decodes is cut to the cap",
			budget: 2048, threshold: 256, beside: 256, running: []int{8, 8, 8, 8}, waiting: []int{128, 128, 128, 128},
			want: []string{"r0:1", "r1:1", "r2:1", "r3:1", "r4:128", "r5:128"}},
		{name: "beside decodes: the cap cuts a chunk too",
			budget: 2048, beside: 100, running: []int{8, 8}, waiting: []int{128, 128},
			want: []string{"r0:1", "r1:1", "r2:100"}},
		{name: "beside decodes: no cap in a step without decodes",
			budget: 2048, threshold: 256, beside: 256, waiting: []int{128, 128, 128, 128},
			want: []string{"r0:128", "r1:128", "r2:128", "r3:128"}},
		{name: "beside decodes: a running prefill continues within the cap",
			budget: 2048, beside: 100, running: []int{8}, waiting: []int{300}, steps: 1,
			want: []string{"r0:1", "r1:100"}},
		{name: "partial prefills off (1): two long prompts both start",
			budget: 2048, threshold: 256, partial: 1, waiting: []int{1000, 1000},
			want: []string{"r0:256", "r1:256"}},
		{name: "partial prefills 2, long 1: the second long prompt waits, a short one passes it",
			budget: 512, threshold: 100, partial: 2, long: 1, waiting: []int{1000, 1000, 50},
			want: []string{"r0:100", "r2:50"}},
		{name: "partial prefills 2, long 2: both long prompts share the budget",
			budget: 150, threshold: 100, partial: 2, long: 2, waiting: []int{1000, 1000, 50},
			want: []string{"r0:75", "r1:75"}},
		{name: "partial prefills 3: the budget is split three ways",
			budget: 300, threshold: 1000, partial: 3, long: 3, waiting: []int{500, 500, 500, 500},
			want: []string{"r0:100", "r1:100", "r2:100"}},
		{name: "partial prefills 2: a running prefill counts against the limit",
			budget: 300, threshold: 1000, partial: 2, long: 2, waiting: []int{500, 500, 500}, steps: 1,
			want: []string{"r0:150", "r1:150"}},
		{name: "partial prefills with threshold 0: 4 % of max-model-len",
			budget: 2048, partial: 2, long: 1, waiting: []int{500},
			want: []string{"r0:163"}, wantThreshold: 163},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, cfg := runPrefillCase(t, c)
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("step: %v, want %v", got, c.want)
			}
			if c.wantThreshold > 0 && cfg.LongPrefillTokenThreshold != c.wantThreshold {
				t.Errorf("threshold %d, want %d", cfg.LongPrefillTokenThreshold, c.wantThreshold)
			}
		})
	}
}

func runPrefillCase(t *testing.T, c prefillCase) ([]string, Config) {
	t.Helper()
	pool := kvcache.New(1024, 16)
	s := New(Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 4096, MaxModelLen: 4096,
		LongPrefillTokenThreshold: c.threshold, MaxNumPartialPrefills: c.partial, MaxLongPartialPrefills: c.long,
		PrefillTokensBesideDecodes: c.beside}, pool)
	id := 0
	add := func(n, shared int) {
		t.Helper()
		req := &ipc.AddRequest{RequestID: fmt.Sprintf("r%d", id), PromptTokenIDs: make([]int32, n)}
		for i := range req.PromptTokenIDs {
			req.PromptTokenIDs[i] = int32(3 + i + 7*id)
			if i < shared {
				req.PromptTokenIDs[i] = int32(3 + i) // r0's tokens
			}
		}
		req.Params.Logprobs = -1
		req.Params.IgnoreEOS = true
		id++
		if err := s.Add(req, 0); err != nil {
			t.Fatal(err)
		}
	}
	var res []sample.Result
	step := func() *Batch {
		b := s.Schedule(0)
		res = append(res[:0], make([]sample.Result, len(b.Seqs))...)
		for i := range res {
			res[i].Token = 9
		}
		return b
	}
	update := func(b *Batch) {
		s.Update(b, res, 0, func(*ipc.Output) {})
		s.DrainReleased(func(string) {})
	}
	for _, n := range c.running {
		add(n, 0)
	}
	// prefill the running requests (whatever it takes), then one decode
	for s.NumWaiting() > 0 || anyPrefill(s) {
		update(step())
	}
	s.cfg.MaxNumBatchedTokens = c.budget
	for _, n := range c.waiting {
		add(n, c.sharedPrefix)
	}
	for range c.steps {
		update(step())
	}
	b := step()
	var got []string
	for _, sw := range b.Seqs {
		got = append(got, fmt.Sprintf("%s:%d", sw.ReqID, len(sw.Tokens)))
	}
	return got, s.Config()
}

// anyPrefill reports whether a running request has more than one token
// to compute.
func anyPrefill(s *Scheduler) bool {
	for _, r := range s.running {
		if len(r.tokens)-r.numComputed > 1 {
			return true
		}
	}
	return false
}

// TestPrefillConfigValidate checks the new limits' validation.
func TestPrefillConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		fail bool
	}{
		{Config{LongPrefillTokenThreshold: 256}, false},
		{Config{MaxNumPartialPrefills: 4, MaxLongPartialPrefills: 2}, false},
		{Config{LongPrefillTokenThreshold: -1}, true},
		{Config{PrefillTokensBesideDecodes: -1}, true},
		{Config{MaxNumPartialPrefills: -1}, true},
		{Config{MaxNumPartialPrefills: 2, MaxLongPartialPrefills: 3}, true},
		{Config{MaxLongPartialPrefills: 2}, true}, // partial prefills default to 1
	} {
		cfg := DefaultConfig()
		cfg.LongPrefillTokenThreshold, cfg.MaxNumPartialPrefills, cfg.MaxLongPartialPrefills, cfg.PrefillTokensBesideDecodes =
			c.cfg.LongPrefillTokenThreshold, c.cfg.MaxNumPartialPrefills, c.cfg.MaxLongPartialPrefills, c.cfg.PrefillTokensBesideDecodes
		if err := cfg.Validate(); (err != nil) != c.fail {
			t.Errorf("%+v: error %v, want failure %v", c.cfg, err, c.fail)
		}
	}
}

// TestWaitingFillsStepThreshold checks that the arrival window counts a
// long prompt as the chunk it computes in the first step.
func TestWaitingFillsStepThreshold(t *testing.T) {
	pool := kvcache.New(1024, 16)
	s := New(Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 512, MaxModelLen: 4096, LongPrefillTokenThreshold: 256}, pool)
	for i, n := range []int{2000, 200} {
		req := &ipc.AddRequest{RequestID: fmt.Sprint(i), PromptTokenIDs: make([]int32, n)}
		req.Params.Logprobs = -1
		if err := s.Add(req, 0); err != nil {
			t.Fatal(err)
		}
		if s.WaitingFillsStep() {
			t.Fatalf("after %d prompts: the step is full, want not (256, then 456 of 512 tokens)", i+1)
		}
	}
	req := &ipc.AddRequest{RequestID: "x", PromptTokenIDs: make([]int32, 56)}
	req.Params.Logprobs = -1
	if err := s.Add(req, 0); err != nil {
		t.Fatal(err)
	}
	if !s.WaitingFillsStep() {
		t.Fatal("256+200+56 tokens do not fill a 512-token step")
	}
}
