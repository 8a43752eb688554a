//go:build cuda

package cudaexec

// GPU tests of the whole model on the CUDA backend against the CPU path.
// Without a GPU they skip (the driver is loaded at run time and Open fails
// cleanly), unless SLUICE_CUDA_REQUIRE=1 (scripts/gpu-run.sh sets it),
// which turns the skip into a failure.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/model"
	"github.com/sluice-llm/sluice/engine-core/runner"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/kernels/cuda"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

const logitsTol = 1e-3 // relative L2 error of the logits against the CPU path

func openCUDA(t testing.TB) *cuda.Backend {
	t.Helper()
	b, err := cuda.Open(cuda.Options{})
	if err != nil {
		if os.Getenv("SLUICE_CUDA_REQUIRE") == "1" {
			t.Fatalf("no usable CUDA device (SLUICE_CUDA_REQUIRE=1): %v", err)
		}
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// modelPaths are the real checkpoints plus a generated Q8_0 model, so both
// weight encodings go through the device.
func modelPaths(t *testing.T) map[string]string {
	t.Helper()
	q8, err := demo.EnsureCachedAs("tiny", 0, demo.FormatGGUFQ8_0)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"aidreams260K.bin":         testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"),
		"aidreams260K-f32.gguf":    testenv.SharedFile(t, "aidreams260K/aidreams260K-f32.gguf"),
		"llama-2-tiny-random.gguf": testenv.SharedFile(t, "llama-2-tiny-random/llama-2-tiny-random.gguf"),
		"demo-tiny-q8_0.gguf":      q8,
	}
}

func relErr(got, want []float32) float64 {
	var d, w float64
	for i := range want {
		x := float64(got[i]) - float64(want[i])
		d += x * x
		w += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / max(w, 1e-30))
}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// twoSeqs drives two sequences through m in shared varlen batches: one
// prefill step of both prompts, then decode steps of one token each, fed
// with the CPU path's greedy tokens so both backends see the same inputs.
type twoSeqs struct {
	toks  [2][]int32
	done  [2]int
	table [2][]int32
}

func (s *twoSeqs) batch(bs int) *model.Batch {
	b := &model.Batch{Attn: kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: bs}}
	for q := range 2 {
		for p := s.done[q]; p < len(s.toks[q]); p++ {
			b.Tokens = append(b.Tokens, s.toks[q][p])
			b.Pos = append(b.Pos, int32(p))
			b.Attn.Slots = append(b.Attn.Slots, s.table[q][p/bs]*int32(bs)+int32(p%bs))
		}
		b.Attn.QStart = append(b.Attn.QStart, int32(len(b.Tokens)))
		b.Attn.CtxLen = append(b.Attn.CtxLen, int32(len(s.toks[q])))
		b.Attn.Tables = append(b.Attn.Tables, s.table[q]...)
		b.Attn.TableStart = append(b.Attn.TableStart, int32(len(b.Attn.Tables)))
		b.OutRows = append(b.OutRows, int32(len(b.Tokens)-1))
	}
	return b
}

func TestLogitsMatchCPU(t *testing.T) {
	dev := openCUDA(t)
	for name, path := range modelPaths(t) {
		t.Run(name, func(t *testing.T) {
			cpuBE := cpu.New(cpu.Options{Threads: 2})
			defer cpuBE.Close()
			mc, err := model.Load(path, cpuBE, model.LoadOptions{MaxPos: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer mc.Close()
			md, err := model.Load(path, dev, model.LoadOptions{MaxPos: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer md.Close()
			const bs, steps = 16, 24
			nb := 2 * (256 / bs)
			kc, kd := mc.NewKVCache(nb, bs), md.NewKVCache(nb, bs)
			sc, sd := mc.NewScratch(64, 2), md.NewScratch(64, 2)
			vocab := mc.Cfg.Vocab
			s := &twoSeqs{}
			for q := range 2 {
				for k := range 256 / bs {
					s.table[q] = append(s.table[q], int32(nb-1-(q*(256/bs)+k))) // scrambled
				}
			}
			s.toks[0] = []int32{1, int32(3 % vocab), int32(100 % vocab), int32(37 % vocab), int32(250 % vocab)}
			s.toks[1] = []int32{1, int32(7 % vocab), int32(8 % vocab)}
			for step := range steps {
				b := s.batch(bs)
				want, err := mc.Forward(sc, kc, b)
				if err != nil {
					t.Fatal(err)
				}
				want = append([]float32(nil), want...)
				got, err := md.Forward(sd, kd, b)
				if err != nil {
					t.Fatal(err)
				}
				if e := relErr(got, want); !(e <= logitsTol) {
					t.Fatalf("step %d: logits relative error %.3g > %g", step, e, logitsTol)
				}
				for q := range 2 {
					s.done[q] = len(s.toks[q])
					s.toks[q] = append(s.toks[q], argmax(want[q*vocab:(q+1)*vocab]))
				}
			}
		})
	}
}

// generate runs greedy decoding of prompt for steps tokens through an
// executor, one sequence, the way the scheduler drives it.
func generate(t *testing.T, ex sched.Executor, prompt []int32, steps, bs int) []int32 {
	t.Helper()
	table := make([]int32, (len(prompt)+steps+bs-1)/bs)
	for i := range table {
		table[i] = int32(len(table) - 1 - i)
	}
	toks := append([]int32(nil), prompt...)
	done := 0
	out := make([]sample.Result, 1)
	params := &ipc.SamplingParams{Temperature: 0, Logprobs: -1}
	var gen []int32
	for step := range steps {
		b := &sched.Batch{Step: uint64(step), Seqs: []sched.SeqWork{{
			ReqID: "r", Tokens: toks[done:], StartPos: done, BlockTable: table, Sample: true,
			In: sample.Input{Params: params, History: toks, NumPrompt: len(prompt)},
		}}}
		if err := ex.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		done = len(toks)
		toks = append(toks, out[0].Token)
		gen = append(gen, out[0].Token)
	}
	return gen
}

func TestGreedyGenerationMatchesCPU(t *testing.T) {
	openCUDA(t) // skip early without a usable device
	var ref struct {
		Runs []struct {
			PromptIDs    []int32 `json:"prompt_ids"`
			GeneratedIDs []int32 `json:"generated_ids"`
			Steps        int     `json:"steps"`
		} `json:"runs"`
	}
	raw, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	run := ref.Runs[0]
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	const bs = 16
	cfg := runner.Config{Model: path, BlockSize: bs, NumBlocks: 64, MaxBatchTokens: 128, MaxSeqs: 4}
	cr, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	gr, err := New(cfg, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	steps := min(run.Steps, len(run.GeneratedIDs))
	want := generate(t, cr, run.PromptIDs, steps, bs)
	got := generate(t, gr, run.PromptIDs, steps, bs)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: CUDA %d, CPU %d\nCUDA %v\nCPU  %v", i, got[i], want[i], got, want)
		}
	}
	// and the CPU path itself matches the reference run
	for i := range want {
		if want[i] != run.GeneratedIDs[i] {
			t.Fatalf("CPU token %d: %d, reference %d", i, want[i], run.GeneratedIDs[i])
		}
	}
}

// TestGreedyStories260KMatchesCPU: greedy generation from BOS on
// stories260K (GQA: 8 heads over 4 KV heads) gives the CPU path's tokens.
func TestGreedyStories260KMatchesCPU(t *testing.T) {
	openCUDA(t) // skip early without a usable device
	path := testenv.SharedFile(t, "stories260K/stories260K.bin")
	const bs, steps = 16, 200
	cfg := runner.Config{Model: path, BlockSize: bs, NumBlocks: 64, MaxBatchTokens: 256, MaxSeqs: 4}
	cr, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	gr, err := New(cfg, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	prompt := []int32{1} // BOS
	want := generate(t, cr, prompt, steps, bs)
	got := generate(t, gr, prompt, steps, bs)
	if len(got) != len(want) {
		t.Fatalf("CUDA generated %d tokens, CPU %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: CUDA %d, CPU %d\nCUDA %v\nCPU  %v", i, got[i], want[i], got, want)
		}
	}
}

// sampleRun generates steps tokens from prompt on ex with params and seed,
// one sequence; when forced is not nil its tokens are fed back instead of
// the sampled ones (teacher forcing), so two executors see the same inputs.
func sampleRun(t *testing.T, ex sched.Executor, prompt []int32, steps, bs int, params *ipc.SamplingParams, seed uint64, forced []int32) []int32 {
	t.Helper()
	table := make([]int32, (len(prompt)+steps+bs-1)/bs)
	for i := range table {
		table[i] = int32(i)
	}
	toks := append([]int32(nil), prompt...)
	done := 0
	out := make([]sample.Result, 1)
	var gen []int32
	for step := range steps {
		b := &sched.Batch{Step: uint64(step), Seqs: []sched.SeqWork{{
			ReqID: "r", Tokens: toks[done:], StartPos: done, BlockTable: table, Sample: true,
			In: sample.Input{Params: params, History: toks, NumPrompt: len(prompt), Seed: seed},
		}}}
		if err := ex.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		done = len(toks)
		gen = append(gen, out[0].Token)
		next := out[0].Token
		if forced != nil {
			next = forced[step]
		}
		toks = append(toks, next)
	}
	return gen
}

// TestDeviceSamplingMatchesHostSampling runs the runner's on-device
// sampling (the default on the CUDA backend: only ids come back) against
// host sampling of the same device logits (Config.HostSampling) and
// against the CPU path: greedy ids must be identical; seeded temperature /
// top-k / top-p draws use the host's random numbers and rule, so they may
// differ only where a draw lands within float32 rounding of a boundary.
func TestDeviceSamplingMatchesHostSampling(t *testing.T) {
	openCUDA(t)
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	const bs, steps = 16, 64
	cfg := runner.Config{Model: path, BlockSize: bs, NumBlocks: 64, MaxBatchTokens: 128, MaxSeqs: 4}
	cr, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	dr, err := New(cfg, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	if !dr.DeviceSampling() {
		t.Fatal("CUDA runner does not sample on the device")
	}
	hcfg := cfg
	hcfg.HostSampling = true
	hr, err := New(hcfg, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Close()
	prompt := []int32{1, 403, 407, 261, 378}
	for _, p := range []*ipc.SamplingParams{
		{Temperature: 0, Logprobs: -1},
		{Temperature: 0.8, TopK: 40, Logprobs: -1},
		{Temperature: 1, TopP: 0.9, Logprobs: -1},
		{Temperature: 1.5, Logprobs: -1},
	} {
		want := sampleRun(t, cr, prompt, steps, bs, p, 42, nil)
		gotHost := sampleRun(t, hr, prompt, steps, bs, p, 42, want)
		gotDev := sampleRun(t, dr, prompt, steps, bs, p, 42, want)
		agree := func(a, b []int32) int {
			n := 0
			for i := range a {
				if a[i] == b[i] {
					n++
				}
			}
			return n
		}
		if p.Temperature == 0 {
			if agree(gotDev, want) != steps || agree(gotHost, want) != steps {
				t.Errorf("greedy: device sampling %v\nhost sampling %v\nCPU %v", gotDev, gotHost, want)
			}
			continue
		}
		// 95%: a rounding-boundary draw is far rarer than one in twenty.
		if n := agree(gotDev, gotHost); n < steps*95/100 {
			t.Errorf("%+v: device and host sampling of the same logits agree on %d of %d draws", *p, n, steps)
		}
		if n := agree(gotDev, want); n < steps*95/100 {
			t.Errorf("%+v: device sampling and the CPU path agree on %d of %d draws", *p, n, steps)
		}
	}
	if d, h := dr.SampledRows(); d != 4*steps || h != 0 {
		t.Errorf("device-sampling runner: %d rows on the device, %d on the host", d, h)
	}
	if d, _ := hr.SampledRows(); d != 0 {
		t.Errorf("HostSampling runner sampled %d rows on the device", d)
	}
}

// TestDeviceMixedStepMatchesCPU drives three greedy sequences in shared
// steps on the CUDA runner: one sampled on the device, one asking for
// logprobs and one with a repetition penalty (both sampled on the host
// from logits gathered on the device into a tensor of their own). Tokens
// must equal the CPU path's and logprobs agree to 1e-3.
func TestDeviceMixedStepMatchesCPU(t *testing.T) {
	openCUDA(t)
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	const bs, steps = 16, 40
	cfg := runner.Config{Model: path, BlockSize: bs, NumBlocks: 64, MaxBatchTokens: 128, MaxSeqs: 4}
	cr, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	gr, err := New(cfg, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	params := []*ipc.SamplingParams{
		{Temperature: 0, Logprobs: -1},
		{Temperature: 0, Logprobs: 2},
		{Temperature: 0, RepetitionPenalty: 1.3, Logprobs: -1},
	}
	prompts := [][]int32{{1, 403, 407, 261, 378}, {1, 9, 300, 42}, {1, 77, 12}}
	run := func(ex sched.Executor) ([][]int32, [][]ipc.TokenLogprobs) {
		toks := make([][]int32, len(prompts))
		done := make([]int, len(prompts))
		lps := make([][]ipc.TokenLogprobs, len(prompts))
		out := make([]sample.Result, len(prompts))
		for i, p := range prompts {
			toks[i] = append([]int32(nil), p...)
		}
		for step := range steps {
			b := &sched.Batch{Step: uint64(step)}
			for i := range prompts {
				table := []int32{int32(4 * i), int32(4*i + 1), int32(4*i + 2), int32(4*i + 3)}
				b.Seqs = append(b.Seqs, sched.SeqWork{ReqID: fmt.Sprint(i), Tokens: toks[i][done[i]:], StartPos: done[i], BlockTable: table,
					Sample: true, In: sample.Input{Params: params[i], History: toks[i], NumPrompt: len(prompts[i])}})
			}
			if err := ex.Execute(b, out); err != nil {
				t.Fatal(err)
			}
			for i := range prompts {
				done[i] = len(toks[i])
				toks[i] = append(toks[i], out[i].Token)
				lp := out[i].Logprobs
				lp.TopIDs, lp.TopLogprobs = append([]int32(nil), lp.TopIDs...), append([]float32(nil), lp.TopLogprobs...)
				lps[i] = append(lps[i], lp)
			}
		}
		return toks, lps
	}
	want, wantLP := run(cr)
	got, gotLP := run(gr)
	for i := range prompts {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("seq %d token %d: CUDA %d, CPU %d\nCUDA %v\nCPU  %v", i, j, got[i][j], want[i][j], got[i], want[i])
			}
		}
		for j := range wantLP[i] {
			g, w := gotLP[i][j], wantLP[i][j]
			if math.Abs(float64(g.Logprob-w.Logprob)) > 1e-3 || g.Rank != w.Rank || len(g.TopIDs) != len(w.TopIDs) {
				t.Fatalf("seq %d token %d: CUDA logprobs %+v, CPU %+v", i, j, g, w)
			}
		}
	}
	if d, h := gr.SampledRows(); d != steps || h != 2*steps {
		t.Errorf("sampled rows: %d on the device, %d on the host; want %d, %d", d, h, steps, 2*steps)
	}
}

// TestDeviceGreedyMatchesHost checks on-device greedy sampling over the
// model's own logits against the host argmax.
func TestDeviceGreedyMatchesHost(t *testing.T) {
	dev := openCUDA(t)
	m, err := model.Load(testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"), dev, model.LoadOptions{MaxPos: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := &twoSeqs{toks: [2][]int32{{1, 50, 60, 70}, {1, 9}}, table: [2][]int32{{0, 1, 2, 3}, {4, 5, 6, 7}}}
	logits, err := m.Forward(m.NewScratch(16, 2), m.NewKVCache(8, 16), s.batch(16))
	if err != nil {
		t.Fatal(err)
	}
	vocab := m.Cfg.Vocab
	lt, err := dev.WeightF32(2, vocab, append([]float32(nil), logits...))
	if err != nil {
		t.Fatal(err)
	}
	ids, lps := make([]int32, 2), make([]float32, 2)
	if err := dev.Greedy(lt, 2, ids, lps); err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		if want := argmax(logits[q*vocab : (q+1)*vocab]); ids[q] != want {
			t.Errorf("row %d: device greedy %d, host %d", q, ids[q], want)
		}
	}
}

// BenchmarkDecode measures decode steps through the CUDA runner on the
// generated stories110M-shaped model and reports the achieved memory
// bandwidth (weight bytes read per step / step time) as a fraction of the
// device's theoretical peak.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		format string
		nseq   int
	}{{demo.FormatHF, 1}, {demo.FormatHF, 16}, {demo.FormatGGUFQ8_0, 1}} {
		b.Run(fmt.Sprintf("110m-%s-seqs%d", c.format, c.nseq), func(b *testing.B) {
			path, err := demo.EnsureCachedAs("110m", 0, c.format)
			if err != nil {
				b.Fatal(err)
			}
			var r *Runner
			defer func() {
				if r != nil {
					r.Close()
				}
			}()
			benchDecode(b, path, c.nseq, &r)
		})
	}
}

// BenchmarkDecodeBatch is the decode sweep of scripts/gpu-run.sh: batches of
// 1, 16, 64 and 256 sequences on the model at $SLUICE_DECODE_MODEL (the run
// generates a TinyLlama-1.1B-shaped one with `engine-core gen-model --shape
// 1b`), or on the generated 110m model when it is unset. Besides tok/s it
// reports the weight bandwidth and the HBM bandwidth (weights + the KV cache
// read by attention + the KV written, per second) against the peak.
//
//	SLUICE_DECODE_MODEL=DIR go test -tags cuda -run '^$' -bench DecodeBatch -benchtime 20x ./engine-core/cudaexec
func BenchmarkDecodeBatch(b *testing.B) {
	path := os.Getenv("SLUICE_DECODE_MODEL")
	name := filepath.Base(path)
	if path == "" {
		var err error
		if path, err = demo.EnsureCachedAs("110m", 0, demo.FormatHF); err != nil {
			b.Fatal(err)
		}
		name = "110m"
	}
	for _, nseq := range []int{1, 16, 64, 256} {
		var r *Runner // loaded once per batch size, for the N=1 probe run and the timed one
		b.Run(fmt.Sprintf("%s-seqs%d", name, nseq), func(b *testing.B) { benchDecode(b, path, nseq, &r) })
		if r != nil {
			r.Close()
		}
	}
}

// benchDecode runs greedy decode steps of nseq sequences (128-token
// prompts, contexts up to 1024) on the model at path, loading it into *rp
// the first time (the caller closes it: the testing package calls a
// benchmark function more than once, and a 1B model takes seconds to load).
func benchDecode(b *testing.B, path string, nseq int, rp **Runner) {
	const bs, prompt, maxLen = 16, 128, 1024
	per := maxLen / bs
	if *rp == nil {
		r, err := New(runner.Config{Model: path, BlockSize: bs, NumBlocks: nseq * per, MaxBatchTokens: max(prompt*nseq, 128), MaxSeqs: nseq}, cuda.Options{})
		if err != nil {
			if os.Getenv("SLUICE_CUDA_REQUIRE") == "1" {
				b.Fatalf("CUDA runner: %v", err)
			}
			b.Skipf("CUDA runner: %v", err)
		}
		*rp = r
	}
	r := *rp
	be := r.Backend().(*cuda.Backend)
	kvPerTok := float64(r.KVBytesPerBlock()) / bs // every layer's K and V of one position
	params := &ipc.SamplingParams{Temperature: 0, Logprobs: -1}
	toks := make([][]int32, nseq)
	done := make([]int, nseq)
	batch := &sched.Batch{}
	out := make([]sample.Result, nseq)
	for i := range toks {
		for j := range prompt {
			toks[i] = append(toks[i], int32((i*7919+j*104729)%31990+5))
		}
	}
	tables := make([][]int32, nseq)
	for i := range tables {
		tables[i] = make([]int32, per)
		for k := range tables[i] {
			tables[i][k] = int32(i*per + k)
		}
	}
	var kvRead float64 // KV bytes attention reads in the timed steps
	step := func() {
		batch.Seqs = batch.Seqs[:0]
		for i := range toks {
			batch.Seqs = append(batch.Seqs, sched.SeqWork{ReqID: fmt.Sprint(i), Tokens: toks[i][done[i]:], StartPos: done[i],
				BlockTable: tables[i], Sample: true, In: sample.Input{Params: params, History: toks[i], NumPrompt: prompt}})
			kvRead += float64(len(toks[i])) * kvPerTok
		}
		if err := r.Execute(batch, out); err != nil {
			b.Fatal(err)
		}
		for i := range toks {
			done[i] = len(toks[i])
			toks[i] = append(toks[i], out[i].Token)
		}
	}
	step() // prefill
	kvRead = 0
	b.ResetTimer()
	for range b.N {
		if len(toks[0]) >= maxLen {
			b.StopTimer()
			for i := range toks {
				toks[i], done[i] = toks[i][:prompt+1], prompt
			}
			b.StartTimer()
		}
		step()
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*nseq)/sec, "tok/s")
	b.ReportMetric(sec/float64(b.N)*1e3, "ms/step")
	wbw := float64(be.WeightBytes()) * float64(b.N) / sec
	hbm := wbw + (kvRead+float64(b.N*nseq)*kvPerTok)/sec
	b.ReportMetric(wbw/1e9, "weight-GB/s")
	b.ReportMetric(hbm/1e9, "hbm-GB/s")
	if _, _, peak, err := be.DeviceInfo(); err == nil {
		b.ReportMetric(wbw/peak, "frac-of-peak-bw")
		b.ReportMetric(hbm/peak, "hbm-frac-of-peak")
	}
}
