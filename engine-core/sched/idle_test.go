package sched

import (
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/ipc"
)

// TestWaitingFillsStep checks when the arrival window may stop early: the
// waiting requests reach max-num-seqs (counting the running ones), the
// token budget, or the free KV blocks.
func TestWaitingFillsStep(t *testing.T) {
	for _, c := range []struct {
		name         string
		seqs, budget int
		blocks       int
		running      []int // prompts admitted and computed before the check
		waiting      []int // prompt lengths left waiting
		want         bool
	}{
		{name: "empty", seqs: 4, budget: 512, blocks: 64, want: false},
		{name: "one short", seqs: 4, budget: 512, blocks: 64, waiting: []int{10}, want: false},
		{name: "seqs full", seqs: 4, budget: 512, blocks: 64, waiting: []int{10, 10, 10, 10}, want: true},
		{name: "seqs full with running", seqs: 4, budget: 512, blocks: 64, running: []int{10, 10}, waiting: []int{10, 10}, want: true},
		{name: "seqs not full with running", seqs: 4, budget: 512, blocks: 64, running: []int{10}, waiting: []int{10, 10}, want: false},
		{name: "budget reached exactly", seqs: 16, budget: 256, blocks: 64, waiting: []int{128, 128}, want: true},
		{name: "budget one short", seqs: 16, budget: 256, blocks: 64, waiting: []int{128, 127}, want: false},
		{name: "budget passed", seqs: 16, budget: 100, blocks: 64, waiting: []int{150}, want: true},
		{name: "kv blocks reached", seqs: 16, budget: 4096, blocks: 8, waiting: []int{64, 64}, want: true}, // 4+4 of 8
		{name: "kv blocks left", seqs: 16, budget: 4096, blocks: 9, waiting: []int{64, 64}, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := kvcache.New(c.blocks, 16)
			s := New(Config{MaxNumSeqs: c.seqs, MaxNumBatchedTokens: max(c.budget, 512), MaxModelLen: 1024, DisablePrefixCaching: true}, pool)
			id := 0
			addN := func(n int) {
				t.Helper()
				req := &ipc.AddRequest{RequestID: string(rune('a' + id)), PromptTokenIDs: make([]int32, n)}
				for i := range req.PromptTokenIDs {
					req.PromptTokenIDs[i] = int32(3 + i + 100*id)
				}
				req.Params.MaxTokens = 1
				req.Params.Logprobs = -1
				id++
				if err := s.Add(req, 0); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range c.running {
				addN(n)
			}
			if len(c.running) > 0 {
				if b := s.Schedule(0); len(b.Seqs) != len(c.running) {
					t.Fatalf("admitted %d of %d running requests", len(b.Seqs), len(c.running))
				}
			}
			s.cfg.MaxNumBatchedTokens = c.budget
			for _, n := range c.waiting {
				addN(n)
			}
			if got := s.WaitingFillsStep(); got != c.want {
				t.Errorf("WaitingFillsStep = %v, want %v (running %d, waiting %d, free blocks %d)",
					got, c.want, s.NumRunning(), s.NumWaiting(), pool.NumFree())
			}
		})
	}
}
