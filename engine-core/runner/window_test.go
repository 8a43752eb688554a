package runner

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// forcing is a Sampler that keeps every logits row it is given, keyed by
// (request seed, position), and answers a token fixed by the same key
// (teacher forcing: the path does not depend on near-tied logits).
type forcing struct {
	vocab int
	rows  map[[2]uint64][]float32
}

func (f *forcing) Sample(logits []float32, in []sample.Input, out []sample.Result) error {
	for i := range in {
		key := [2]uint64{in[i].Seed, uint64(len(in[i].History))}
		f.rows[key] = append([]float32(nil), logits[i*f.vocab:(i+1)*f.vocab]...)
		out[i] = sample.Result{Token: int32((key[0]*7919 + key[1]*104729) % uint64(f.vocab))}
	}
	return nil
}

// serveAll runs reqs to completion through a real scheduler and r, and
// returns the scheduler's stats.
func serveAll(t *testing.T, r *Runner, reqs []*ipc.AddRequest, maxTokens int) ipc.SchedulerStats {
	t.Helper()
	info := r.Info()
	pool := kvcache.New(info.NumBlocks, info.BlockSize)
	s := sched.New(sched.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: maxTokens, MaxModelLen: info.MaxModelLen, SlidingWindow: info.SlidingWindow}, pool)
	for _, q := range reqs {
		if err := s.Add(q, 0); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]sample.Result, 8)
	for step := 0; s.HasWork(); step++ {
		if step > 5000 {
			t.Fatal("workload does not finish")
		}
		b := s.Schedule(float64(step))
		s.DrainReleased(r.Release)
		if err := r.Execute(b, out[:len(b.Seqs)]); err != nil {
			t.Fatal(err)
		}
		s.Update(b, out, float64(step), func(*ipc.Output) {})
		s.DrainReleased(r.Release)
	}
	if msg := pool.CheckInvariants(); msg != "" || pool.NumFree() != pool.NumBlocks() {
		t.Fatalf("pool after the workload: %q, %d of %d free", msg, pool.NumFree(), pool.NumBlocks())
	}
	return s.Stats()
}

// TestSplitKVMatchesUnified serves the same teacher-forced workload (six
// requests, prompts of 30–70 tokens, several 8-token windows long, sharing
// prefixes; chunked prefill and decode) on gen-model's tiny gpt-oss, once
// with one block table for all layers and plenty of blocks, and once with
// the sliding layers' own block table (the default) in a cache small enough
// to force preemption while prefix hits still happen: every position's
// logits agree. The split cache's block holds half the layers, so the same
// memory holds twice the blocks.
func TestSplitKVMatchesUnified(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	shape := demo.RealShapes["gpt-oss-tiny"]
	shape.Vocab = 1024
	if err := demo.GenerateShape(path, shape, 3, demo.FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	const bs = 4
	workload := func() []*ipc.AddRequest {
		var reqs []*ipc.AddRequest
		for i, plen := range []int{30, 70, 45, 52, 33, 61} {
			q := &ipc.AddRequest{RequestID: fmt.Sprint("r", i), PromptTokenIDs: make([]int32, plen)}
			for j := range q.PromptTokenIDs {
				q.PromptTokenIDs[j] = int32((j*31 + 5) % 1000) // shared prefix
				if j >= 24 {
					q.PromptTokenIDs[j] = int32((i*131 + j*17) % 1000)
				}
			}
			q.Params = ipc.SamplingParams{MaxTokens: 12, IgnoreEOS: true, Logprobs: -1, Seed: int64(i + 1), HasSeed: true}
			reqs = append(reqs, q)
		}
		return reqs
	}
	run := func(cfg Config) (map[[2]uint64][]float32, ipc.SchedulerStats, Info) {
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		f := &forcing{vocab: r.Info().VocabSize, rows: map[[2]uint64][]float32{}}
		r.sampler = f
		st := serveAll(t, r, workload(), 16)
		return f.rows, st, r.Info()
	}
	base := Config{Model: path, BlockSize: bs, Threads: 2, MaxBatchTokens: 16, MaxSeqs: 8, MaxModelLen: 256}
	unified := base
	unified.UnifiedKV, unified.NumBlocks = true, 200
	want, _, uinfo := run(unified)
	split := base
	split.NumBlocks = 40 // 160 positions: fewer than the six requests' 428
	got, st, sinfo := run(split)
	if uinfo.SlidingWindow != 0 || sinfo.SlidingWindow != shape.SlidingWindow {
		t.Fatalf("SlidingWindow: unified %d, split %d, want 0 and %d", uinfo.SlidingWindow, sinfo.SlidingWindow, shape.SlidingWindow)
	}
	if 2*sinfo.KVCacheBytes/int64(sinfo.NumBlocks) != uinfo.KVCacheBytes/int64(uinfo.NumBlocks) {
		t.Errorf("bytes per block: split %d, unified %d; want half", sinfo.KVCacheBytes/int64(sinfo.NumBlocks), uinfo.KVCacheBytes/int64(uinfo.NumBlocks))
	}
	if st.Preemptions == 0 || st.PrefixHits == 0 {
		t.Errorf("split run had %d preemptions and %d prefix-hit tokens; the test wants both", st.Preemptions, st.PrefixHits)
	}
	if len(got) != len(want) || len(want) != 6*12 {
		t.Fatalf("%d sampled positions split, %d unified, want %d", len(got), len(want), 6*12)
	}
	for key, w := range want {
		g := got[key]
		var maxAbs, maxDiff float64
		for k, v := range w {
			maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
			maxDiff = math.Max(maxDiff, math.Abs(float64(g[k]-v)))
		}
		if g == nil || maxDiff > 1e-3*math.Max(maxAbs, 1) {
			t.Errorf("request seed %d position %d: logits differ by %g (max |logit| %g)", key[0], key[1], maxDiff, maxAbs)
		}
	}
}

// TestSplitKVNoAllocPerStep checks that a batched decode step over a split
// cache (window tables with given-back entries) allocates nothing, and that
// a step without window tables, or with a given-back block inside the
// window, is refused with an error.
func TestSplitKVNoAllocPerStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	shape := demo.RealShapes["gpt-oss-tiny"]
	shape.Vocab = 1024
	if err := demo.GenerateShape(path, shape, 3, demo.FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	const bs = 4
	r, err := New(Config{Model: path, NumBlocks: 64, BlockSize: bs, Threads: 2, MaxModelLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Info().SlidingWindow != shape.SlidingWindow {
		t.Fatalf("SlidingWindow %d, want %d", r.Info().SlidingWindow, shape.SlidingWindow)
	}
	hist := make([]int32, 0, 64)
	for i := range 40 {
		hist = append(hist, int32(i*37%1000))
	}
	b := &sched.Batch{}
	for i := range 4 {
		full, win := make([]int32, 10), make([]int32, 10)
		for j := range full {
			full[j], win[j] = int32(i*16+j), int32(i*16+10+j%6)
			if j < 5 {
				win[j] = kvcache.NoBlock
			}
		}
		b.Seqs = append(b.Seqs, sched.SeqWork{ReqID: fmt.Sprint(i), Tokens: hist[:1], StartPos: 30, BlockTable: full, WindowTable: win,
			Sample: true, In: sample.Input{Params: greedy, History: hist[:31], NumPrompt: 30}})
	}
	out := make([]sample.Result, 4)
	if err := r.Execute(b, out); err != nil {
		t.Fatal(err)
	}
	pos := 30
	allocs := testing.AllocsPerRun(20, func() {
		pos = 30 + (pos-29)%8 // positions 30..37: blocks 7..9, window from block 5
		for i := range b.Seqs {
			b.Seqs[i].Tokens, b.Seqs[i].StartPos = hist[pos:pos+1], pos
		}
		if err := r.Execute(b, out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per step", allocs)
	}
	b.Seqs[1].WindowTable[7] = kvcache.NoBlock
	if err := r.Execute(b, out); err == nil {
		t.Error("a given-back block inside the window: want error")
	}
	b.Seqs[1].WindowTable = nil
	if err := r.Execute(b, out); err == nil {
		t.Error("no window table on a split cache: want error")
	}
}
