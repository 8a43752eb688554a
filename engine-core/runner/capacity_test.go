package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// capacity is what one KV budget holds for one cache layout.
type capacity struct {
	info Info
	// bytesPerToken is the cache memory of one position of a decoding
	// sequence of ctx positions (both tables, the window's bounded).
	bytesPerToken float64
	// concurrent is the most ctx-position sequences the scheduler had
	// decoding in one step; preemptions counts its recomputes.
	concurrent  int
	preemptions int64
}

// measureCapacity loads path with a KV budget of budget bytes and runs the
// real scheduler (no forward pass: a fake sampler) over many requests of
// ctx positions (prompt ctx-out, out outputs), counting how many decode at
// once.
func measureCapacity(t *testing.T, path string, budget int64, unified bool, ctx, out int) capacity {
	t.Helper()
	const bs, chunk = 16, 2048
	r, err := New(Config{Model: path, KVCacheBytes: budget, BlockSize: bs, MaxModelLen: ctx, MaxBatchTokens: 16, MaxSeqs: 1, UnifiedKV: unified, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	info := r.Info()
	r.Close()
	perSeq := sched.KVBlocksFor(ctx, bs, 0, 0)
	if info.SlidingWindow > 0 {
		perSeq += (info.SlidingWindow+bs-1)/bs + 1
	}
	c := capacity{info: info, bytesPerToken: float64(info.KVCacheBytes) / float64(info.NumBlocks) * float64(perSeq) / float64(ctx)}
	pool := kvcache.New(info.NumBlocks, bs)
	s := sched.New(sched.Config{MaxNumSeqs: 4096, MaxNumBatchedTokens: chunk, MaxModelLen: ctx + 1, SlidingWindow: info.SlidingWindow}, pool)
	nreq := 2*info.NumBlocks/perSeq + 4
	for i := range nreq {
		q := &ipc.AddRequest{RequestID: fmt.Sprint(i), PromptTokenIDs: make([]int32, ctx-out)}
		for j := range q.PromptTokenIDs {
			q.PromptTokenIDs[j] = int32(3 + (i*977+j*31)%500) // no shared prefix
		}
		q.Params = ipc.SamplingParams{MaxTokens: int32(out), IgnoreEOS: true, Logprobs: -1}
		if err := s.Add(q, 0); err != nil {
			t.Fatal(err)
		}
	}
	res := make([]sample.Result, 4096)
	for step := 0; s.HasWork(); step++ {
		if step > 100000 {
			t.Fatal("workload does not finish")
		}
		b := s.Schedule(0)
		decoding := 0
		for i, sw := range b.Seqs {
			if len(sw.Tokens) == 1 && sw.StartPos >= ctx-out {
				decoding++
			}
			res[i].Token = 7
		}
		c.concurrent = max(c.concurrent, decoding)
		s.Update(b, res, 0, func(*ipc.Output) {})
		s.DrainReleased(func(string) {})
	}
	c.preemptions = s.Stats().Preemptions
	return c
}

// TestKVCapacity compares, for one KV budget, a unified cache (one block
// table for every layer) with the split cache (the sliding-window layers'
// own table) on gen-model's tiny gpt-oss and, when $SLUICE_KV_MODEL names a
// file (e.g. gen-model's gpt-oss-20b), on that file with
// $SLUICE_KV_BYTES (default 4 GiB): bytes per token of a 4096-position
// sequence and how many sequences of 3.5k–4k positions the real scheduler
// keeps decoding at once. The split cache must hold more (for gpt-oss's half-and-half
// layers, nearly twice as many).
func TestKVCapacity(t *testing.T) {
	tiny := filepath.Join(t.TempDir(), "m.gguf")
	shape := demo.RealShapes["gpt-oss-tiny"]
	shape.Vocab = 1024
	if err := demo.GenerateShape(tiny, shape, 3, demo.FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		path   string
		budget int64
	}{{"gpt-oss-tiny", tiny, 16 << 20}}
	if p := os.Getenv("SLUICE_KV_MODEL"); p != "" {
		budget := int64(4 << 30)
		if v := os.Getenv("SLUICE_KV_BYTES"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("SLUICE_KV_BYTES: %v", err)
			}
			budget = n
		}
		cases = append(cases, struct {
			name   string
			path   string
			budget int64
		}{filepath.Base(filepath.Dir(p)), p, budget})
	}
	// prompts of 3584 and 512 outputs: a request prefills in two steps
	// and then decodes for 512, so the running set fills the cache with
	// sequences of 3.5k–4k positions
	const ctx, out = 4096, 512
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := measureCapacity(t, c.path, c.budget, true, ctx, out)
			s := measureCapacity(t, c.path, c.budget, false, ctx, out)
			for _, m := range []struct {
				name string
				c    capacity
			}{{"unified", u}, {"split", s}} {
				t.Logf("%s %s: budget %d MiB, %d blocks of %d KiB, window %d: %.2f KiB per token at %d positions, %d sequences of %d-%d positions decoding at once (%d preemptions)",
					c.name, m.name, c.budget>>20, m.c.info.NumBlocks, m.c.info.KVCacheBytes/int64(m.c.info.NumBlocks)>>10, m.c.info.SlidingWindow,
					m.c.bytesPerToken/1024, ctx, m.c.concurrent, ctx-out, ctx, m.c.preemptions)
			}
			if s.info.SlidingWindow == 0 || s.bytesPerToken >= 0.6*u.bytesPerToken || float64(s.concurrent) < 1.6*float64(u.concurrent) || u.concurrent == 0 {
				t.Errorf("split cache: %.0f B/token, %d sequences; unified: %.0f B/token, %d sequences", s.bytesPerToken, s.concurrent, u.bytesPerToken, u.concurrent)
			}
		})
	}
}
