package sched

import (
	"fmt"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// TestKVBlocksFor checks the per-request block count the scheduler and the
// engine's start-up check use, with and without a sliding window.
func TestKVBlocksFor(t *testing.T) {
	for _, c := range []struct {
		tokens, bs, window, chunk, want int
	}{
		{4096, 16, 0, 2048, 256},
		{4096, 16, 128, 2048, 256 + 137}, // 2048+127 positions: 136 blocks, +1 for alignment
		{4096, 16, 128, 16, 256 + 10},
		{100, 16, 128, 2048, 7 + 7}, // never more window blocks than full ones
		{1, 16, 128, 2048, 2},
		{17, 4, 8, 64, 5 + 5},
	} {
		if got := KVBlocksFor(c.tokens, c.bs, c.window, c.chunk); got != c.want {
			t.Errorf("KVBlocksFor(%d, %d, %d, %d) = %d, want %d", c.tokens, c.bs, c.window, c.chunk, got, c.want)
		}
	}
}

// TestWindowTableBounded runs gpt-oss's geometry (window 128, blocks of
// 16) through a 1000-token prompt in chunks of 256 and 500 decode steps,
// with three other requests decoding beside it: after every step, the
// window table of each decoding request holds at most ceil(128/16)+1 = 9
// blocks while its full table covers every position, the pool's usage is
// exactly the live entries of both tables, and a decode step allocates
// nothing.
func TestWindowTableBounded(t *testing.T) {
	const bs, window = 16, 128
	pool := kvcache.New(512, bs)
	s := New(Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 256, MaxModelLen: 4096, SlidingWindow: window}, pool)
	for i, plen := range []int{1000, 40, 130, 300} {
		req := &ipc.AddRequest{RequestID: fmt.Sprint("r", i), PromptTokenIDs: make([]int32, plen)}
		for j := range req.PromptTokenIDs {
			req.PromptTokenIDs[j] = int32(3 + (i*7+j)%50)
		}
		req.Params = ipc.SamplingParams{MaxTokens: 500, IgnoreEOS: true, Logprobs: -1}
		if err := s.Add(req, 0); err != nil {
			t.Fatal(err)
		}
	}
	results := make([]sample.Result, 8)
	decodes := 0
	step := func() {
		b := s.Schedule(0)
		used := 0
		for i, sw := range b.Seqs {
			end := sw.StartPos + len(sw.Tokens)
			full := pool.BlocksFor(end)
			if len(sw.BlockTable) != full || len(sw.WindowTable) != full {
				t.Fatalf("%s at %d: tables of %d and %d blocks, want %d", sw.ReqID, end, len(sw.BlockTable), len(sw.WindowTable), full)
			}
			live := 0
			for _, id := range sw.WindowTable {
				if id != kvcache.NoBlock {
					live++
				}
			}
			if len(sw.Tokens) == 1 {
				decodes++
				if live > (window+bs-1)/bs+1 {
					t.Fatalf("%s decoding at %d holds %d window blocks", sw.ReqID, sw.StartPos, live)
				}
			}
			used += full + live
			results[i].Token = 7
		}
		if b.NumTokens > 0 && len(b.Seqs) == s.NumRunning() && used != pool.NumBlocks()-pool.NumFree() {
			t.Fatalf("pool has %d blocks in use, the tables %d", pool.NumBlocks()-pool.NumFree(), used)
		}
		s.Update(b, results, 0, func(*ipc.Output) {})
		s.DrainReleased(func(string) {})
	}
	for range 40 {
		step()
	}
	if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
		t.Errorf("decode step allocates %v times", allocs)
	}
	for s.HasWork() {
		step()
	}
	if decodes < 1000 || pool.NumFree() != pool.NumBlocks() {
		t.Fatalf("%d decode rows; %d of %d blocks free at the end", decodes, pool.NumFree(), pool.NumBlocks())
	}
	if msg := pool.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}
