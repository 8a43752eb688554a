package runner

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/llama2c"
)

// recorder wraps the real sampler and keeps a copy of every logits row it
// is given (the sampler overwrites them).
type recorder struct {
	s    *sample.Sampler
	rows [][]float32
}

func (r *recorder) Sample(logits []float32, in []sample.Input, out []sample.Result) error {
	v := r.s.VocabSize()
	for i := range in {
		r.rows = append(r.rows, append([]float32(nil), logits[i*v:(i+1)*v]...))
	}
	return r.s.Sample(logits, in, out)
}

var greedy = &ipc.SamplingParams{Temperature: 0, Logprobs: -1}

// request is one sequence driven by the test's little scheduler.
type request struct {
	id     string
	prompt []int32
	// forced, when set, replaces sampled tokens (teacher forcing), so
	// random-weight models with near-tied logits still follow one path.
	forced []int32
	maxNew int
	// sharePrefix: reuse the first sharePrefix positions' blocks of
	// request shareWith (which must have computed them already).
	shareWith   int
	sharePrefix int
	startStep   int

	toks     []int32 // prompt + generated
	done     int     // positions computed
	table    []int32
	gen      []int32
	logits   [][]float32
	finished bool
}

// drive runs reqs to completion on r, batching every active request in each
// step: prefill chunks of up to chunk tokens, then one decode token per
// step.
func drive(t *testing.T, r *Runner, rec *recorder, reqs []*request, chunk int) {
	t.Helper()
	bs := r.Info().BlockSize
	nextBlock := int32(0)
	alloc := func(q *request, upto int) {
		for len(q.table)*bs < upto {
			if int(nextBlock) >= r.Info().NumBlocks {
				t.Fatal("test ran out of KV blocks")
			}
			q.table = append(q.table, nextBlock)
			nextBlock++
		}
	}
	out := make([]sample.Result, len(reqs))
	for step := 0; ; step++ {
		b := &sched.Batch{Step: uint64(step)}
		var owners []*request
		active := false
		for _, q := range reqs {
			if q.finished {
				continue
			}
			active = true
			if step < q.startStep {
				continue
			}
			if q.toks == nil {
				q.toks = append([]int32(nil), q.prompt...)
				if q.sharePrefix > 0 {
					src := reqs[q.shareWith]
					if src.done < q.sharePrefix {
						continue // wait for the prefix to be computed
					}
					q.table = append(q.table, src.table[:q.sharePrefix/bs]...)
					q.done = q.sharePrefix
				}
			}
			n := min(chunk, len(q.toks)-q.done)
			alloc(q, q.done+n)
			sw := sched.SeqWork{ReqID: q.id, Tokens: q.toks[q.done : q.done+n], StartPos: q.done, BlockTable: q.table}
			if q.done+n == len(q.toks) {
				sw.Sample = true
				sw.In = sample.Input{Params: greedy, History: q.toks, NumPrompt: len(q.prompt)}
			}
			b.Seqs = append(b.Seqs, sw)
			b.NumTokens += n
			owners = append(owners, q)
		}
		if !active {
			return
		}
		if len(b.Seqs) == 0 {
			continue
		}
		rec.rows = rec.rows[:0]
		if err := r.Execute(b, out[:len(b.Seqs)]); err != nil {
			t.Fatal(err)
		}
		k := 0
		for i, q := range owners {
			q.done += len(b.Seqs[i].Tokens)
			if !b.Seqs[i].Sample {
				continue
			}
			q.logits = append(q.logits, rec.rows[k])
			k++
			tok := out[i].Token
			q.gen = append(q.gen, tok)
			if q.forced != nil {
				tok = q.forced[len(q.gen)-1]
			}
			q.toks = append(q.toks, tok)
			if len(q.gen) >= q.maxNew {
				q.finished = true
			}
		}
		if k != len(rec.rows) {
			t.Fatalf("step %d: %d sampled rows, %d logits rows", step, k, len(rec.rows))
		}
	}
}

func newRunner(t *testing.T, model string) (*Runner, *recorder) {
	t.Helper()
	return newRunnerKV(t, model, "")
}

// newRunnerKV is newRunner with a KV-cache element type.
func newRunnerKV(t *testing.T, model, kvDType string) (*Runner, *recorder) {
	t.Helper()
	rec := &recorder{}
	r, err := New(Config{Model: model, NumBlocks: 256, BlockSize: 16, Threads: 2, MaxBatchTokens: 8, MaxSeqs: 2, KVCacheDType: kvDType})
	if err != nil {
		t.Fatal(err)
	}
	rec.s = sample.New(r.Info().VocabSize)
	r.sampler = rec
	t.Cleanup(func() { r.Close() })
	return r, rec
}

func TestAidreamsGreedyRunner(t *testing.T) {
	b, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Runs []struct {
			PromptIDs    []int32 `json:"prompt_ids"`
			GeneratedIDs []int32 `json:"generated_ids"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	want := ref.Runs[0]
	for _, file := range []string{"aidreams260K/aidreams260K.bin", "aidreams260K/aidreams260K-f32.gguf"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r, rec := newRunner(t, testenv.SharedFile(t, file))
			info := r.Info()
			if info.VocabSize != 512 || info.MaxModelLen != 128 || info.Name == "" || len(info.EOS) == 0 {
				t.Errorf("info %+v", info)
			}
			q := &request{id: "a", prompt: want.PromptIDs, maxNew: len(want.GeneratedIDs)}
			drive(t, r, rec, []*request{q}, 1000)
			for i, tok := range want.GeneratedIDs {
				if q.gen[i] != tok {
					t.Fatalf("token %d: got %d want %d\ngot  %v\nwant %v", i, q.gen[i], tok, q.gen, want.GeneratedIDs)
				}
			}
		})
	}
}

// makeRequests builds 8 requests of different lengths; requests 1-3 share
// the first 32 positions (two blocks) of request 0, request 5 shares one
// block of request 4.
func makeRequests(r *rand.Rand, vocab int, maxNew int, forced bool) []*request {
	prefix := make([]int32, 40)
	for i := range prefix {
		prefix[i] = int32(r.IntN(vocab-3) + 3)
	}
	lens := []int{40, 37, 45, 33, 20, 24, 5, 13}
	var reqs []*request
	for i, n := range lens {
		p := make([]int32, n)
		for j := range p {
			p[j] = int32(r.IntN(vocab-3) + 3)
		}
		q := &request{id: string(rune('a' + i)), maxNew: maxNew, startStep: i % 3}
		switch i {
		case 1, 2, 3:
			copy(p, prefix[:32])
			q.shareWith, q.sharePrefix = 0, 32
		case 0:
			copy(p, prefix)
		case 5:
			copy(p[:16], reqs[4].prompt[:16])
			q.shareWith, q.sharePrefix = 4, 16
		}
		q.prompt = p
		if forced {
			q.forced = make([]int32, maxNew)
			for j := range q.forced {
				q.forced[j] = int32(r.IntN(vocab))
			}
		}
		reqs = append(reqs, q)
	}
	return reqs
}

func clone(reqs []*request) []*request {
	var out []*request
	for _, q := range reqs {
		c := &request{id: q.id, prompt: q.prompt, forced: q.forced, maxNew: q.maxNew}
		out = append(out, c)
	}
	return out
}

// checkBatchedEqualsSolo runs each request alone, then all of them
// batched with staggered starts, chunked prefill and shared prefix blocks,
// and compares tokens and logits.
func checkBatchedEqualsSolo(t *testing.T, model string, forced bool) {
	r, rec := newRunner(t, model)
	reqs := makeRequests(rand.New(rand.NewPCG(11, 12)), r.Info().VocabSize, 12, forced)
	solo := clone(reqs)
	for _, q := range solo {
		drive(t, r, rec, []*request{q}, 1000)
	}
	drive(t, r, rec, reqs, 7)
	for i, q := range reqs {
		s := solo[i]
		for j := range s.gen {
			if q.gen[j] != s.gen[j] {
				t.Fatalf("request %d token %d: batched %d, solo %d", i, j, q.gen[j], s.gen[j])
			}
			var maxAbs, maxDiff float64
			for k, v := range s.logits[j] {
				maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
				maxDiff = math.Max(maxDiff, math.Abs(float64(q.logits[j][k]-v)))
			}
			if maxDiff > 1e-4*math.Max(maxAbs, 1e-3) {
				t.Fatalf("request %d output %d: logits differ by %g (max |logit| %g)", i, j, maxDiff, maxAbs)
			}
		}
	}
}

// TestKVCacheFloat16 runs the same forced token sequences (batched, with
// chunked prefill and shared prefix blocks) with an F32 and an F16 KV
// cache: the F16 cache takes half the bytes per block and its logits stay
// within 1 % of the F32 ones (float16 keeps 11 significant bits).
func TestKVCacheFloat16(t *testing.T) {
	model := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	r32, rec32 := newRunnerKV(t, model, "float32")
	r16, rec16 := newRunnerKV(t, model, "float16")
	if got, want := r16.KVBytesPerBlock(), r32.KVBytesPerBlock()/2; got != want {
		t.Fatalf("F16 KV bytes per block %d, want %d", got, want)
	}
	reqs := makeRequests(rand.New(rand.NewPCG(5, 6)), r32.Info().VocabSize, 10, true)
	a, b := clone(reqs), clone(reqs)
	drive(t, r32, rec32, a, 7)
	drive(t, r16, rec16, b, 7)
	for i := range a {
		for j := range a[i].logits {
			var maxAbs, maxDiff float64
			for k, v := range a[i].logits[j] {
				maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
				maxDiff = math.Max(maxDiff, math.Abs(float64(b[i].logits[j][k]-v)))
			}
			if maxDiff > 1e-2*maxAbs || maxDiff == 0 && j > 0 {
				t.Fatalf("request %d output %d: F16-cache logits differ by %g (max |logit| %g)", i, j, maxDiff, maxAbs)
			}
		}
	}
	if _, err := New(Config{Model: model, KVCacheDType: "int4"}); err == nil {
		t.Fatal("KVCacheDType int4 accepted")
	}
}

func TestBatchedEqualsSoloAidreams(t *testing.T) {
	checkBatchedEqualsSolo(t, testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"), false)
}

func TestBatchedEqualsSoloDemo(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Generate(dir, "tiny", 1, demo.FormatHF); err != nil {
		t.Fatal(err)
	}
	checkBatchedEqualsSolo(t, dir, true)
}

func TestExecuteErrors(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Generate(dir, "tiny", 1, demo.FormatHF); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Model: dir, NumBlocks: 4, BlockSize: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := make([]sample.Result, 1)
	for name, sw := range map[string]sched.SeqWork{
		"short table": {ReqID: "x", Tokens: make([]int32, 20), BlockTable: []int32{0}},
		"bad block":   {ReqID: "x", Tokens: []int32{1}, BlockTable: []int32{9}},
		"bad token":   {ReqID: "x", Tokens: []int32{600}, BlockTable: []int32{0}},
		"too long":    {ReqID: "x", Tokens: []int32{1}, StartPos: 5000, BlockTable: []int32{0}},
	} {
		if err := r.Execute(&sched.Batch{Seqs: []sched.SeqWork{sw}}, out); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if r.KVBytesPerBlock() != 2*2*16*32*4 {
		t.Errorf("KVBytesPerBlock = %d", r.KVBytesPerBlock())
	}
	r2, err := New(Config{Model: dir, KVCacheBytes: 10 * r.KVBytesPerBlock(), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Info().NumBlocks != 10 {
		t.Errorf("NumBlocks from KVCacheBytes = %d, want 10", r2.Info().NumBlocks)
	}
	r2.Close()
}

func TestDemoModelName(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	r, err := New(Config{Model: "demo", NumBlocks: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if info := r.Info(); info.VocabSize != 512 || info.Name != "demo-tiny-0" || info.BOS != 508 {
		t.Errorf("demo info %+v", info)
	}
	if _, err := New(Config{Model: "demo-huge"}); err == nil {
		t.Error("unknown demo shape: want error")
	}
}

// TestNoAllocPerStep checks that a steady-state step (batched decode of
// several sequences) allocates nothing.
func TestNoAllocPerStep(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Generate(dir, "tiny", 1, demo.FormatHF); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Model: dir, NumBlocks: 64, BlockSize: 16, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hist := make([]int32, 0, 64)
	hist = append(hist, 5, 6, 7)
	b := &sched.Batch{}
	for i := 0; i < 4; i++ {
		b.Seqs = append(b.Seqs, sched.SeqWork{ReqID: "r", Tokens: hist[:3], BlockTable: []int32{int32(2 * i), int32(2*i + 1)},
			Sample: true, In: sample.Input{Params: greedy, History: hist, NumPrompt: 3}})
	}
	out := make([]sample.Result, 4)
	if err := r.Execute(b, out); err != nil {
		t.Fatal(err)
	}
	pos := 3
	allocs := testing.AllocsPerRun(20, func() {
		for i := range b.Seqs {
			b.Seqs[i].Tokens = hist[pos-1 : pos]
			b.Seqs[i].StartPos = pos - 1
		}
		if err := r.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		pos = 3 + (pos-2)%20
	})
	if allocs != 0 {
		t.Errorf("%v allocations per step", allocs)
	}
}

// exportHF converts a llama2.c checkpoint to a Hugging Face directory with
// llama2c.ExportHF (q/k rows permuted to rotate-half RoPE).
func exportHF(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if err := llama2c.ExportHF(path, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAidreamsSafetensorsRunner(t *testing.T) {
	b, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Runs []struct {
			PromptIDs    []int32 `json:"prompt_ids"`
			GeneratedIDs []int32 `json:"generated_ids"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	want := ref.Runs[0]
	r, rec := newRunner(t, exportHF(t, testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")))
	q := &request{id: "a", prompt: want.PromptIDs, maxNew: len(want.GeneratedIDs)}
	drive(t, r, rec, []*request{q}, 5)
	for i, tok := range want.GeneratedIDs {
		if q.gen[i] != tok {
			t.Fatalf("token %d: got %d want %d", i, q.gen[i], tok)
		}
	}
}
