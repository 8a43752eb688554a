package runner

import (
	"math"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// fakeDevice is a CPU backend that also implements kernels.DeviceSampler,
// standing in for the CUDA backend: its Greedy and SampleRows read the
// logits tensor in place (as the device kernels do) and apply the rules of
// kernels/cuda/sample.cu. It counts what the runner copies to the host
// through ToHost.
type fakeDevice struct {
	kernels.Backend
	toHostCalls, toHostRows  int
	greedyCalls, sampleCalls int
	order                    []int32 // scratch for top-p
}

var _ kernels.DeviceSampler = (*fakeDevice)(nil)

func newFakeDevice() *fakeDevice {
	return &fakeDevice{Backend: cpu.New(cpu.Options{Threads: 2})}
}

func (f *fakeDevice) ToHost(t kernels.Tensor, n int) []float32 {
	f.toHostCalls++
	f.toHostRows += n
	return f.Backend.ToHost(t, n)
}

// PrepareMatMul passes weight preparation (the CPU backend's panel
// packing, when it has it) through to the wrapped backend, so the fake
// computes the same logits as a plain CPU runner.
func (f *fakeDevice) PrepareMatMul(w kernels.Tensor, keepRows bool) error {
	if p, ok := f.Backend.(kernels.MatMulPreparer); ok {
		return p.PrepareMatMul(w, keepRows)
	}
	return nil
}

// rows reads the first n rows of a logits tensor where it lives (not a
// host copy: the CPU backend's tensors are host memory).
func rows(t kernels.Tensor, n int) (data []float32, cols int) {
	h := t.(*kernels.Host)
	return h.F[:n*h.C], h.C
}

// rowArgmax is the device argmax: the largest value's lowest id, NaNs
// ignored, 0 when nothing exceeds -inf; and the log-softmax there.
func rowArgmax(r []float32) (int32, float32) {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range r {
		if v > bv {
			best, bv = i, v
		}
	}
	var z float64
	for _, v := range r {
		z += math.Exp(float64(v - bv))
	}
	return int32(best), float32(float64(bv) - math.Log(z))
}

func (f *fakeDevice) Greedy(logits kernels.Tensor, n int, ids []int32, logprobs []float32) error {
	f.greedyCalls++
	data, v := rows(logits, n)
	for i := range n {
		ids[i], logprobs[i] = rowArgmax(data[i*v : (i+1)*v])
	}
	return nil
}

// SampleRows applies sample_f32's rule in float64: keep every logit at or
// above the k-th largest (top-k) and at or above the largest value whose
// upper set still holds top_p of that mass (top-p), then draw the first
// kept id, in vocabulary order, whose cumulative mass exceeds U times the
// kept mass.
func (f *fakeDevice) SampleRows(logits kernels.Tensor, n int, params []kernels.SampleParams, ids []int32, logprobs []float32) error {
	f.sampleCalls++
	data, v := rows(logits, n)
	for i := range n {
		r, p := data[i*v:(i+1)*v], params[i]
		best, lp := rowArgmax(r)
		ids[i], logprobs[i] = best, lp
		if !(p.Temperature > 0) {
			continue
		}
		m := float64(r[best])
		lse := m - float64(lp)
		f.order = f.order[:0]
		for j := range r {
			f.order = append(f.order, int32(j))
		}
		slices.SortStableFunc(f.order, func(a, b int32) int {
			switch {
			case r[a] > r[b]:
				return -1
			case r[a] < r[b]:
				return 1
			}
			return 0
		})
		e := func(j int32) float64 { return math.Exp((float64(r[j]) - m) / float64(p.Temperature)) }
		t := r[f.order[len(f.order)-1]]
		if p.TopK > 0 && int(p.TopK) < v {
			t = r[f.order[p.TopK-1]]
		}
		var mass float64
		for _, j := range f.order {
			if r[j] < t {
				break
			}
			mass += e(j)
		}
		if p.TopP > 0 && p.TopP < 1 {
			want, acc := float64(p.TopP)*mass, 0.0
			for k, j := range f.order {
				acc += e(j)
				if acc >= want && (k+1 == len(f.order) || r[f.order[k+1]] < r[j]) {
					t, mass = r[j], acc
					break
				}
			}
		}
		target, acc := float64(p.U)*mass, 0.0
		for j, x := range r {
			if x >= t {
				acc += e(int32(j))
				ids[i] = int32(j)
				if acc > target {
					break
				}
			}
		}
		logprobs[i] = float32(float64(r[ids[i]]) - lse)
	}
	return nil
}

// bitsMask is a structured-output mask for the table test.
type bitsMask struct{}

func (bitsMask) Allowed(id int32) bool { return id%2 == 0 }
func (bitsMask) AllowedIDs() []int32   { return nil }

func TestDeviceParams(t *testing.T) {
	hist := []int32{1, 2, 3, 4, 5} // 3 prompt tokens, 2 generated
	u := drawUniform(7, 2)
	cases := []struct {
		name   string
		p      *ipc.SamplingParams
		mask   sample.Mask
		eos    []int32
		want   kernels.SampleParams
		device bool
	}{
		{name: "nil params: greedy", device: true},
		{name: "greedy", p: &ipc.SamplingParams{Logprobs: -1}, device: true},
		{name: "tiny temperature is greedy", p: &ipc.SamplingParams{Temperature: 1e-6, TopK: 5, MinP: 0.5, Logprobs: -1}, device: true},
		{name: "temperature top-k top-p", p: &ipc.SamplingParams{Temperature: 0.8, TopK: 40, TopP: 0.9, Logprobs: -1},
			want: kernels.SampleParams{Temperature: 0.8, TopK: 40, TopP: 0.9, U: u}, device: true},
		{name: "top-k -1 means all", p: &ipc.SamplingParams{Temperature: 1, TopK: -1, Logprobs: -1},
			want: kernels.SampleParams{Temperature: 1, TopK: -1, U: u}, device: true},
		{name: "repetition penalty 1 is off", p: &ipc.SamplingParams{RepetitionPenalty: 1, Logprobs: -1}, device: true},
		{name: "min_p with greedy is moot", p: &ipc.SamplingParams{MinP: 0.1, Logprobs: -1}, device: true},
		{name: "min_tokens reached", p: &ipc.SamplingParams{MinTokens: 2, Logprobs: -1}, eos: []int32{2}, device: true},
		{name: "min_tokens, nothing to suppress", p: &ipc.SamplingParams{MinTokens: 9, IgnoreEOS: true, Logprobs: -1}, eos: []int32{2}, device: true},

		{name: "sampled logprob and rank", p: &ipc.SamplingParams{Logprobs: 0}},
		{name: "top logprobs", p: &ipc.SamplingParams{Temperature: 0.7, Logprobs: 5}},
		{name: "structured-output mask", p: &ipc.SamplingParams{Logprobs: -1}, mask: bitsMask{}},
		{name: "allowed_token_ids", p: &ipc.SamplingParams{AllowedTokenIDs: []int32{4}, Logprobs: -1}},
		{name: "bad_words", p: &ipc.SamplingParams{BadWords: [][]int32{{9}}, Logprobs: -1}},
		{name: "logit_bias", p: &ipc.SamplingParams{LogitBias: []ipc.LogitBias{{Token: 3, Bias: 2}}, Logprobs: -1}},
		{name: "repetition penalty", p: &ipc.SamplingParams{RepetitionPenalty: 1.2, Logprobs: -1}},
		{name: "frequency penalty", p: &ipc.SamplingParams{FrequencyPenalty: 0.5, Logprobs: -1}},
		{name: "presence penalty", p: &ipc.SamplingParams{PresencePenalty: -0.5, Logprobs: -1}},
		{name: "min_tokens suppressing EOS", p: &ipc.SamplingParams{MinTokens: 3, Logprobs: -1}, eos: []int32{2}},
		{name: "min_tokens suppressing stop ids", p: &ipc.SamplingParams{MinTokens: 3, IgnoreEOS: true, StopTokenIDs: []int32{7}, Logprobs: -1}},
		{name: "min_p", p: &ipc.SamplingParams{Temperature: 0.7, MinP: 0.1, Logprobs: -1}},
		{name: "NaN temperature", p: &ipc.SamplingParams{Temperature: float32(math.NaN()), Logprobs: -1}},
		{name: "NaN top_p", p: &ipc.SamplingParams{Temperature: 1, TopP: float32(math.NaN()), Logprobs: -1}},
		{name: "infinite temperature", p: &ipc.SamplingParams{Temperature: float32(math.Inf(1)), Logprobs: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := sample.Input{Params: c.p, History: hist, NumPrompt: 3, Seed: 7, Mask: c.mask, EOS: c.eos}
			got, ok := deviceParams(&in)
			if ok != c.device {
				t.Fatalf("device %v, want %v", ok, c.device)
			}
			if ok && got != c.want {
				t.Errorf("params %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestUniformMatchesHostSampler checks that the device rows get the host
// sampler's random number: over 1024 equal logits the host draws token
// floor(u·1024) exactly, so each draw checks ten bits of u.
func TestUniformMatchesHostSampler(t *testing.T) {
	const V = 1024
	s := sample.New(V)
	logits := make([]float32, V)
	hist := make([]int32, 0, 64)
	out := make([]sample.Result, 1)
	p := &ipc.SamplingParams{Temperature: 1, Logprobs: -1}
	for seed := uint64(0); seed < 200; seed++ {
		for gen := 0; gen < 5; gen++ {
			hist = append(hist[:3], make([]int32, gen)...)
			clear(logits)
			seed := seed * 0x9e3779b97f4a7c15
			if err := s.Sample(logits, []sample.Input{{Params: p, History: hist, NumPrompt: 3, Seed: seed}}, out); err != nil {
				t.Fatal(err)
			}
			if want := int32(uniform64(seed, gen) * V); out[0].Token != want {
				t.Fatalf("seed %#x position %d: host drew %d, uniform64 gives %d", seed, gen, out[0].Token, want)
			}
			if u := drawUniform(seed, gen); !(u >= 0 && u < 1) {
				t.Fatalf("drawUniform %v outside [0, 1)", u)
			}
		}
	}
}

// genReq is one request of genAll.
type genReq struct {
	prompt []int32
	params *ipc.SamplingParams
	seed   uint64
	maxNew int

	toks []int32
	lps  []ipc.TokenLogprobs
}

// genAll runs every request to maxNew tokens, all in the same steps: one
// prefill step, then one decode token each per step. It returns, per step,
// the number of rows whose parameters the device path accepts.
func genAll(t *testing.T, r *Runner, reqs []*genReq) []int {
	t.Helper()
	bs := r.Info().BlockSize
	b := &sched.Batch{}
	next := int32(0)
	for _, q := range reqs {
		q.toks = append([]int32(nil), q.prompt...)
		var table []int32
		for len(table)*bs < len(q.prompt)+q.maxNew {
			table = append(table, next)
			next++
		}
		b.Seqs = append(b.Seqs, sched.SeqWork{ReqID: "r", BlockTable: table, Sample: true})
	}
	out := make([]sample.Result, len(reqs))
	done := make([]int, len(reqs))
	var devRows []int
	for step := 0; ; step++ {
		b.Step = uint64(step)
		b.Seqs = b.Seqs[:0:len(reqs)]
		var owners []*genReq
		nd := 0
		for i, q := range reqs {
			if len(q.toks)-len(q.prompt) >= q.maxNew {
				continue
			}
			sw := b.Seqs[:len(reqs)][i]
			sw.Tokens, sw.StartPos = q.toks[done[i]:], done[i]
			sw.In = sample.Input{Params: q.params, History: q.toks, NumPrompt: len(q.prompt), Seed: q.seed, EOS: r.Info().EOS}
			if _, ok := deviceParams(&sw.In); ok {
				nd++
			}
			b.Seqs = append(b.Seqs, sw)
			owners = append(owners, q)
			done[i] = len(q.toks)
		}
		if len(owners) == 0 {
			return devRows
		}
		if err := r.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		devRows = append(devRows, nd)
		for i, q := range owners {
			q.toks = append(q.toks, out[i].Token)
			lp := out[i].Logprobs
			lp.TopIDs, lp.TopLogprobs = slices.Clone(lp.TopIDs), slices.Clone(lp.TopLogprobs)
			q.lps = append(q.lps, lp)
		}
	}
}

func cloneReqs(reqs []*genReq) []*genReq {
	var out []*genReq
	for _, q := range reqs {
		out = append(out, &genReq{prompt: q.prompt, params: q.params, seed: q.seed, maxNew: q.maxNew})
	}
	return out
}

// newPair opens the model twice: on the fake device backend (sampling on
// the device) and on the CPU backend (sampling on the host).
func newPair(t *testing.T, path string) (dev *Runner, fd *fakeDevice, host *Runner) {
	t.Helper()
	fd = newFakeDevice()
	t.Cleanup(fd.Close)
	cfg := Config{Model: path, NumBlocks: 128, BlockSize: 16, Threads: 2, MaxBatchTokens: 64, MaxSeqs: 8}
	dcfg := cfg
	dcfg.Backend = fd
	var err error
	if dev, err = New(dcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	if !dev.DeviceSampling() {
		t.Fatal("runner on a DeviceSampler backend does not sample on the device")
	}
	if host, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	if host.DeviceSampling() {
		t.Fatal("runner on the CPU backend claims device sampling")
	}
	return dev, fd, host
}

func prompts() [][]int32 {
	return [][]int32{{1, 403, 407, 261, 378}, {1, 9, 300, 42}, {1, 77}, {1, 500, 12, 13, 14, 15, 16, 17, 18, 19, 20}}
}

// TestDeviceGreedyCopiesNoLogits: greedy generation through the device
// path gives the host path's ids on the real tiny model, and no step copies
// a logits row to the host.
func TestDeviceGreedyCopiesNoLogits(t *testing.T) {
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	dev, fd, host := newPair(t, path)
	var reqs []*genReq
	for i, p := range prompts() {
		var params *ipc.SamplingParams
		if i%2 == 0 {
			params = greedy
		}
		reqs = append(reqs, &genReq{prompt: p, params: params, maxNew: 40})
	}
	hreqs := cloneReqs(reqs)
	genAll(t, dev, reqs)
	genAll(t, host, hreqs)
	for i := range reqs {
		if !slices.Equal(reqs[i].toks, hreqs[i].toks) {
			t.Errorf("request %d: device %v\nhost %v", i, reqs[i].toks, hreqs[i].toks)
		}
	}
	if fd.toHostCalls != 0 || fd.toHostRows != 0 {
		t.Errorf("device path copied %d logits rows in %d ToHost calls", fd.toHostRows, fd.toHostCalls)
	}
	if fd.greedyCalls != 40 || fd.sampleCalls != 0 {
		t.Errorf("%d Greedy and %d SampleRows calls, want 40 and 0", fd.greedyCalls, fd.sampleCalls)
	}
	if d, h := dev.SampledRows(); d != 160 || h != 0 {
		t.Errorf("sampled rows: %d on device, %d on host; want 160, 0", d, h)
	}
}

// TestDeviceMixedStep: a step mixing rows the device serves (greedy,
// seeded temperature, top-k or top-p) with rows it does not (penalties,
// logprobs, min_p, min_tokens) samples each on its own path, copies only
// the host rows' logits, and gives the host path's tokens and logprobs.
// (Top-k with top-p draws the same distribution in another order: see
// TestDeviceTopKTopPDistribution.)
func TestDeviceMixedStep(t *testing.T) {
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	dev, fd, host := newPair(t, path)
	params := []*ipc.SamplingParams{
		greedy,
		{Temperature: 0.8, TopK: 40, Logprobs: -1},
		{Temperature: 1, Logprobs: -1},
		{Temperature: 0.6, TopP: 0.5, Logprobs: -1},
		{RepetitionPenalty: 1.3, Logprobs: -1},
		{Temperature: 0.9, Logprobs: 3},
		{Temperature: 0.7, MinP: 0.1, Logprobs: -1},
		{MinTokens: 10, Logprobs: -1}, // host for its first 10 tokens, then device
	}
	var reqs []*genReq
	ps := prompts()
	for i, p := range params {
		reqs = append(reqs, &genReq{prompt: ps[i%len(ps)], params: p, seed: uint64(1000 + 17*i), maxNew: 30})
	}
	hreqs := cloneReqs(reqs)
	devRows := genAll(t, dev, reqs)
	genAll(t, host, hreqs)
	for i := range reqs {
		if !slices.Equal(reqs[i].toks, hreqs[i].toks) {
			t.Errorf("request %d %+v: device %v\nhost %v", i, *params[i], reqs[i].toks, hreqs[i].toks)
		}
		// The device path puts its rows first, so a host row may sit at
		// another row of the LM-head product; the CPU kernels' summation
		// order may depend on that position (last-bit differences).
		near := func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5 }
		if !slices.EqualFunc(reqs[i].lps, hreqs[i].lps, func(a, b ipc.TokenLogprobs) bool {
			return near(a.Logprob, b.Logprob) && a.Rank == b.Rank && slices.Equal(a.TopIDs, b.TopIDs) && slices.EqualFunc(a.TopLogprobs, b.TopLogprobs, near)
		}) {
			t.Errorf("request %d: logprobs differ", i)
		}
	}
	if got := reqs[5].lps[0]; len(got.TopIDs) != 3 || got.Rank < 1 {
		t.Errorf("logprobs request got %+v", got)
	}
	var nd, nh int
	for _, d := range devRows {
		nd += d
		nh += len(params) - d
	}
	if d, h := dev.SampledRows(); d != uint64(nd) || h != uint64(nh) {
		t.Errorf("sampled rows: %d on device, %d on host; want %d, %d", d, h, nd, nh)
	}
	if fd.toHostRows != nh || fd.toHostCalls != len(devRows) {
		t.Errorf("copied %d logits rows in %d calls; want the %d host rows in %d calls", fd.toHostRows, fd.toHostCalls, nh, len(devRows))
	}
	if nd != 4*30+20 || fd.sampleCalls != len(devRows) {
		t.Errorf("%d device rows in %d SampleRows calls", nd, fd.sampleCalls)
	}
}

// TestDeviceNoAllocPerStep: a steady-state step through the device path,
// mixed with a host row, allocates nothing.
func TestDeviceNoAllocPerStep(t *testing.T) {
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	dev, fd, _ := newPair(t, path)
	hist := make([]int32, 0, 64)
	hist = append(hist, 1, 6, 7)
	ps := []*ipc.SamplingParams{greedy, {Temperature: 0.8, TopK: 20, Logprobs: -1}, {RepetitionPenalty: 1.1, Logprobs: -1}}
	b := &sched.Batch{}
	for i, p := range ps {
		b.Seqs = append(b.Seqs, sched.SeqWork{ReqID: "r", Tokens: hist[:3], BlockTable: []int32{int32(2 * i), int32(2*i + 1)},
			Sample: true, In: sample.Input{Params: p, History: hist, NumPrompt: 3, Seed: 5}})
	}
	out := make([]sample.Result, len(ps))
	if err := dev.Execute(b, out); err != nil {
		t.Fatal(err)
	}
	fd.order = make([]int32, 0, dev.Info().VocabSize)
	pos := 3
	allocs := testing.AllocsPerRun(20, func() {
		for i := range b.Seqs {
			b.Seqs[i].Tokens = hist[pos-1 : pos]
			b.Seqs[i].StartPos = pos - 1
		}
		if err := dev.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		pos = 3 + (pos-2)%20
	})
	if allocs != 0 {
		t.Errorf("%v allocations per step", allocs)
	}
	if d, h := dev.SampledRows(); d != 2*h {
		t.Errorf("sampled rows: %d on device, %d on host; want 2:1", d, h)
	}
}

// TestHostSamplingOption: Config.HostSampling keeps every row on the host
// even on a DeviceSampler backend.
func TestHostSamplingOption(t *testing.T) {
	fd := newFakeDevice()
	defer fd.Close()
	r, err := New(Config{Model: testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"), Backend: fd, HostSampling: true, NumBlocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.DeviceSampling() {
		t.Fatal("HostSampling runner samples on the device")
	}
	q := &genReq{prompt: prompts()[0], params: greedy, maxNew: 3}
	genAll(t, r, []*genReq{q})
	if fd.greedyCalls+fd.sampleCalls != 0 || fd.toHostRows != 3 {
		t.Errorf("%d device calls, %d rows copied", fd.greedyCalls+fd.sampleCalls, fd.toHostRows)
	}
}

// TestDeviceTopKTopPDistribution: with top-k and top-p together the host
// draws from the kept set in its selection order, the device in
// vocabulary order, so one seed may pick different tokens; the kept set
// and the distribution are the same. Both draw 20000 times from the
// model's logits after a prompt; their supports must match and their
// empirical distributions be close in total variation.
func TestDeviceTopKTopPDistribution(t *testing.T) {
	path := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	dev, fd, _ := newPair(t, path)
	prompt := prompts()[0]
	b := &sched.Batch{Seqs: []sched.SeqWork{{ReqID: "r", Tokens: prompt, BlockTable: []int32{0}, Sample: true}}}
	logits, err := dev.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	V := dev.Info().VocabSize
	row := slices.Clone(logits[:V])
	lt, err := fd.WeightF32(1, V, row)
	if err != nil {
		t.Fatal(err)
	}
	p := &ipc.SamplingParams{Temperature: 3, TopK: 30, TopP: 0.8, Logprobs: -1}
	const N = 20000
	hs := sample.New(V)
	scratch := make([]float32, V)
	out := make([]sample.Result, 1)
	ids, lps := make([]int32, 1), make([]float32, 1)
	hostN, devN := make([]int, V), make([]int, V)
	hist := slices.Clone(prompt)
	for i := range N {
		in := sample.Input{Params: p, History: hist, NumPrompt: len(prompt), Seed: uint64(i) * 0x9e3779b97f4a7c15}
		copy(scratch, row)
		if err := hs.Sample(scratch, []sample.Input{in}, out); err != nil {
			t.Fatal(err)
		}
		hostN[out[0].Token]++
		sp, ok := deviceParams(&in)
		if !ok {
			t.Fatal("top-k + top-p row not accepted for the device")
		}
		if err := fd.SampleRows(lt, 1, []kernels.SampleParams{sp}, ids, lps); err != nil {
			t.Fatal(err)
		}
		devN[ids[0]]++
	}
	var tv float64
	support := 0
	for id := range V {
		if (hostN[id] == 0) != (devN[id] == 0) && max(hostN[id], devN[id]) > N/200 {
			t.Errorf("token %d: host drew it %d times, device %d", id, hostN[id], devN[id])
		}
		if hostN[id] > 0 {
			support++
		}
		tv += math.Abs(float64(hostN[id]-devN[id])) / (2 * N)
	}
	if support < 2 || support > 30 {
		t.Errorf("host drew %d distinct tokens; want 2..30 (top-k 30)", support)
	}
	// Two samples of 20000 from one distribution over at most 30 tokens
	// differ by about 0.02 in total variation.
	if tv > 0.04 {
		t.Errorf("total variation between host and device draws %.4f", tv)
	}
	t.Logf("support %d, total variation %.4f", support, tv)
}

// BenchmarkDecodeSamplingPath measures greedy decode steps of 16 sequences
// on the stories15M-shaped demo model with host sampling and with the
// device path over the fake device (CPU compute either way), and reports
// the bytes each step moves from the backend to the host: k logits rows
// of the vocabulary on the host path, k ids and logprobs (8 bytes each) on
// the device path.
func BenchmarkDecodeSamplingPath(b *testing.B) {
	for _, device := range []bool{false, true} {
		name := "host"
		if device {
			name = "device"
		}
		b.Run(name, func(b *testing.B) {
			const nseq, prompt, maxLen = 16, 32, 256
			path := benchModel(b, "15m", demo.FormatHF)
			fd := newFakeDevice()
			defer fd.Close()
			cfg := Config{Model: path, NumBlocks: nseq * maxLen / 16, BlockSize: 16, MaxBatchTokens: nseq * prompt, MaxSeqs: nseq, Backend: fd, HostSampling: !device}
			r, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			out := make([]sample.Result, nseq)
			batch := &sched.Batch{}
			ss := benchBatch(r, nseq, prompt, maxLen)
			step(b, r, ss, batch, out) // prefill
			rows0, d0 := fd.toHostRows, r.devRows
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(ss[0].toks) >= maxLen {
					b.StopTimer()
					for _, s := range ss {
						s.toks, s.done = s.toks[:prompt+1], prompt
					}
					b.StartTimer()
				}
				step(b, r, ss, batch, out)
			}
			bytes := float64(fd.toHostRows-rows0)*float64(r.Info().VocabSize)*4 + float64(r.devRows-d0)*8
			b.ReportMetric(bytes/float64(b.N), "to-host-B/step")
		})
	}
}

// TestDeviceStepAllHostRows: on a device-sampling runner, a step whose rows
// all need the host sampler copies exactly those rows, straight from the
// logits tensor, and never calls the device sampler.
func TestDeviceStepAllHostRows(t *testing.T) {
	dev, fd, host := newPair(t, testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"))
	p := &ipc.SamplingParams{Temperature: 0.7, FrequencyPenalty: 0.4, Logprobs: 1}
	var reqs []*genReq
	for i, pr := range prompts()[:2] {
		reqs = append(reqs, &genReq{prompt: pr, params: p, seed: uint64(i), maxNew: 12})
	}
	hreqs := cloneReqs(reqs)
	genAll(t, dev, reqs)
	genAll(t, host, hreqs)
	for i := range reqs {
		if !slices.Equal(reqs[i].toks, hreqs[i].toks) {
			t.Errorf("request %d: device runner %v\nhost runner %v", i, reqs[i].toks, hreqs[i].toks)
		}
	}
	if fd.greedyCalls+fd.sampleCalls != 0 || fd.toHostRows != 24 || fd.toHostCalls != 12 {
		t.Errorf("%d device calls; %d rows copied in %d calls, want 24 in 12", fd.greedyCalls+fd.sampleCalls, fd.toHostRows, fd.toHostCalls)
	}
}
