package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// TestRandomWorkloads drives random workloads (lengths, shared prefixes,
// priorities, aborts, EOS, memory sizes) through the scheduler with a fake
// executor that keeps a simulated KV cache, and checks after every step:
//
//   - budgets hold (tokens per step, running requests);
//   - every position a step reads from the KV cache holds the token the
//     request expects there (prefix-cache hits and preemption included);
//   - the pool's free list is consistent;
//   - with a sliding window (half the seeds), every position the window
//     table must serve ([StartPos-W+1, StartPos)) holds the expected token
//     in the window group's block, entries wholly before the window are
//     NoBlock, and a decode step's window table holds at most
//     ceil(W/bs)+1 blocks;
//
// and at the end: every request ended exactly once (a finish output or an
// abort), nothing was emitted after that, and every block is free.
func TestRandomWorkloads(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, seed) })
	}
}

type simReq struct {
	tokens  []int32 // prompt + outputs as emitted
	prompt  int
	max     int
	ended   bool
	aborted bool
}

func runRandom(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	bs := []int{1, 2, 4, 16}[rng.IntN(4)]
	maxLen := 16 + rng.IntN(200)
	numBlocks := (maxLen+bs-1)/bs + rng.IntN(64)
	cfg := Config{
		MaxNumSeqs:           1 + rng.IntN(16),
		MaxNumBatchedTokens:  1 + rng.IntN(128),
		MaxModelLen:          maxLen,
		EOSTokenIDs:          []int32{2},
		DisablePrefixCaching: rng.IntN(4) == 0,
	}
	if wr := rand.New(rand.NewPCG(seed, 7)); wr.IntN(2) == 0 {
		cfg.SlidingWindow = 1 + wr.IntN(40)
		numBlocks += wr.IntN(32)
	}
	if pr := rand.New(rand.NewPCG(seed, 9)); pr.IntN(2) == 0 {
		cfg.LongPrefillTokenThreshold = 1 + pr.IntN(40)
		if pr.IntN(2) == 0 {
			cfg.PrefillTokensBesideDecodes = 1 + pr.IntN(60)
		}
		if pr.IntN(2) == 0 {
			cfg.MaxNumPartialPrefills = 2 + pr.IntN(3)
			cfg.MaxLongPartialPrefills = 1 + pr.IntN(cfg.MaxNumPartialPrefills)
		}
	}
	window := cfg.SlidingWindow
	pool := kvcache.New(numBlocks, bs)
	s := New(cfg, pool)
	kvdata := make([]int32, numBlocks*bs)
	for i := range kvdata {
		kvdata[i] = -1
	}
	prefixes := [][]int32{randTokens(rng, 64), randTokens(rng, 64)}
	reqs := map[string]*simReq{}
	var ids []string
	nReq := 1 + rng.IntN(40)
	now := 0.0
	results := make([]sample.Result, 0, 64)
	for step := 0; step < 20000; step++ {
		now++
		// Arrivals.
		if len(ids) < nReq && rng.IntN(3) == 0 {
			id := fmt.Sprintf("r%d", len(ids))
			plen := 1 + rng.IntN(maxLen+4)
			prompt := randTokens(rng, plen)
			if rng.IntN(2) == 0 {
				copy(prompt, prefixes[rng.IntN(2)])
			}
			req := &ipc.AddRequest{RequestID: id, PromptTokenIDs: prompt, Priority: int32(rng.IntN(3))}
			req.Params.MaxTokens = int32(rng.IntN(40))
			req.Params.Logprobs = -1
			req.Params.IgnoreEOS = rng.IntN(2) == 0
			ids = append(ids, id)
			err := s.Add(req, now)
			sr := &simReq{tokens: append([]int32(nil), prompt...), prompt: plen}
			reqs[id] = sr
			if err != nil {
				sr.ended = true // refused
				if plen < maxLen && plen > 0 && KVBlocksFor(maxLen-1, bs, window, cfg.MaxNumBatchedTokens) <= numBlocks && req.Params.MaxTokens == 0 {
					t.Fatalf("refused a request that fits: %v", err)
				}
			} else {
				sr.max = maxLen - plen
				if m := int(req.Params.MaxTokens); m > 0 && m < sr.max {
					sr.max = m
				}
			}
		}
		// Aborts.
		if len(ids) > 0 && rng.IntN(25) == 0 {
			id := ids[rng.IntN(len(ids))]
			if s.Abort(id) {
				if reqs[id].ended {
					t.Fatalf("abort of ended request %s reported live", id)
				}
				reqs[id].ended, reqs[id].aborted = true, true
			}
		}
		if !s.HasWork() && len(ids) == nReq {
			break
		}
		decoding := map[string]bool{} // running with one token to compute: pass 0
		for _, r := range s.running {
			if len(r.tokens)-r.numComputed == 1 {
				decoding[r.id] = true
			}
		}
		b := s.Schedule(now)
		s.DrainReleased(func(string) {})
		if b.NumTokens > cfg.MaxNumBatchedTokens || len(b.Seqs) > cfg.MaxNumSeqs || s.NumRunning() > cfg.MaxNumSeqs {
			t.Fatalf("step %d over budget: %d tokens, %d seqs, %d running", step, b.NumTokens, len(b.Seqs), s.NumRunning())
		}
		results = results[:0]
		prefills := 0
		for _, sw := range b.Seqs {
			if th := s.Config().LongPrefillTokenThreshold; th > 0 && len(sw.Tokens) > th {
				t.Fatalf("step %d: %s computes %d tokens, threshold %d", step, sw.ReqID, len(sw.Tokens), th)
			}
			if sw.StartPos < sw.In.NumPrompt && len(sw.Tokens) > 1 {
				prefills++
			}
			sr := reqs[sw.ReqID]
			if sr.ended {
				t.Fatalf("scheduled ended request %s", sw.ReqID)
			}
			end := sw.StartPos + len(sw.Tokens)
			if len(sw.BlockTable) < pool.BlocksFor(end) {
				t.Fatalf("%s: block table too short", sw.ReqID)
			}
			for p := range end {
				want := sr.tokens[p]
				slot := int(sw.BlockTable[p/bs])*bs + p%bs
				if p < sw.StartPos {
					if kvdata[slot] != want {
						t.Fatalf("step %d %s: KV position %d holds %d, want %d", step, sw.ReqID, p, kvdata[slot], want)
					}
				} else {
					if sw.Tokens[p-sw.StartPos] != want {
						t.Fatalf("%s: token %d is %d, want %d", sw.ReqID, p, sw.Tokens[p-sw.StartPos], want)
					}
					kvdata[slot] = want
				}
			}
			if window > 0 {
				checkWindowTable(t, step, sw, sr.tokens, kvdata, bs, window)
			} else if sw.WindowTable != nil {
				t.Fatalf("%s: window table without a window", sw.ReqID)
			}
			if sw.Sample != (end == len(sr.tokens)) {
				t.Fatalf("%s: Sample=%v at end %d of %d", sw.ReqID, sw.Sample, end, len(sr.tokens))
			}
			tok := int32(100 + rng.IntN(50))
			if rng.IntN(30) == 0 {
				tok = 2
			}
			results = append(results, sample.Result{Token: tok})
		}
		if c := s.Config().PrefillTokensBesideDecodes; c > 0 {
			dec, pre := 0, 0
			for _, sw := range b.Seqs {
				if decoding[sw.ReqID] {
					dec++
				} else {
					pre += len(sw.Tokens)
				}
			}
			if dec > 0 && pre > c {
				t.Fatalf("step %d: %d prompt tokens beside %d decodes, cap %d", step, pre, dec, c)
			}
		}
		if p := s.Config().MaxNumPartialPrefills; p > 1 && prefills > p {
			t.Fatalf("step %d: %d prefills, max-num-partial-prefills %d", step, prefills, p)
		}
		s.Update(b, results, now, func(o *ipc.Output) {
			sr := reqs[o.RequestID]
			if sr.ended {
				t.Fatalf("output for ended request %s", o.RequestID)
			}
			sr.tokens = append(sr.tokens, o.NewTokenIDs...)
			nOut := len(sr.tokens) - sr.prompt
			if nOut > sr.max {
				t.Fatalf("%s: %d outputs > max %d", o.RequestID, nOut, sr.max)
			}
			if o.FinishReason != ipc.FinishNone {
				sr.ended = true
				if o.FinishReason == ipc.FinishLength && nOut != sr.max {
					t.Fatalf("%s: length finish at %d of %d", o.RequestID, nOut, sr.max)
				}
			} else if nOut == sr.max {
				t.Fatalf("%s: reached max without finishing", o.RequestID)
			}
		})
		s.DrainReleased(func(string) {})
		if msg := pool.CheckInvariants(); msg != "" {
			t.Fatalf("step %d: %s", step, msg)
		}
	}
	if s.HasWork() {
		b := s.Schedule(now)
		t.Logf("cfg %+v blocks %d bs %d: last step %d seqs %d tokens; free %d", s.Config(), numBlocks, bs, len(b.Seqs), b.NumTokens, pool.NumFree())
		for _, r := range s.running {
			t.Logf("running %s status %d mark %d step %d tokens %d computed %d blocks %d win %d", r.id, r.status, r.mark, s.step, len(r.tokens), r.numComputed, len(r.blocks), len(r.win))
		}
		t.Fatalf("workload did not finish: %d running %d waiting", s.NumRunning(), s.NumWaiting())
	}
	for id, sr := range reqs {
		if !sr.ended {
			t.Fatalf("request %s never ended", id)
		}
	}
	st := s.Stats()
	t.Logf("requests=%d steps=%d preemptions=%d prefix hits=%d/%d generated=%d", len(ids), st.StepCount, st.Preemptions, st.PrefixHits, st.PrefixQueries, st.GeneratedTokens)
	if pool.NumFree() != pool.NumBlocks() {
		t.Fatalf("leaked blocks: %d of %d free", pool.NumFree(), pool.NumBlocks())
	}
}

func randTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(3 + rng.IntN(6)) // small alphabet: many equal blocks
	}
	return out
}

// checkWindowTable checks sw's sliding-window table against the simulated
// cache kvdata (shared with the full tables: one pool) and writes the
// step's tokens into the window group's slots.
func checkWindowTable(t *testing.T, step int, sw SeqWork, tokens, kvdata []int32, bs, window int) {
	t.Helper()
	end := sw.StartPos + len(sw.Tokens)
	wt := sw.WindowTable
	if len(wt) < (end+bs-1)/bs {
		t.Fatalf("step %d %s: window table has %d blocks for %d positions", step, sw.ReqID, len(wt), end)
	}
	first := max(0, sw.StartPos-window+1)
	live := 0
	for i, id := range wt[:(end+bs-1)/bs] {
		switch {
		case i < first/bs && id != kvcache.NoBlock:
			t.Fatalf("step %d %s: window block %d (positions before %d) still held", step, sw.ReqID, i, first)
		case i >= first/bs && id == kvcache.NoBlock:
			t.Fatalf("step %d %s: window block %d missing", step, sw.ReqID, i)
		case id != kvcache.NoBlock:
			live++
			if slices.Contains(sw.BlockTable, id) {
				t.Fatalf("step %d %s: block %d in both tables", step, sw.ReqID, id)
			}
		}
	}
	if len(sw.Tokens) == 1 && live > (window+bs-1)/bs+1 {
		t.Fatalf("step %d %s: decode holds %d window blocks, bound %d", step, sw.ReqID, live, (window+bs-1)/bs+1)
	}
	for p := first; p < end; p++ {
		slot := int(wt[p/bs])*bs + p%bs
		if p < sw.StartPos {
			if kvdata[slot] != tokens[p] {
				t.Fatalf("step %d %s: window KV position %d holds %d, want %d", step, sw.ReqID, p, kvdata[slot], tokens[p])
			}
		} else {
			kvdata[slot] = tokens[p]
		}
	}
}
