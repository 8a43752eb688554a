package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

func params(f func(p *ipc.SamplingParams)) *ipc.SamplingParams {
	p := &ipc.SamplingParams{Logprobs: -1}
	if f != nil {
		f(p)
	}
	return p
}

func TestGreedyTiesLowestID(t *testing.T) {
	s := New(5)
	logits := []float32{1, 3, 2, 3, -1}
	out := make([]Result, 1)
	if err := s.Sample(logits, []Input{{Params: params(nil)}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Token != 1 {
		t.Fatalf("greedy picked %d, want 1", out[0].Token)
	}
}

func TestBadInput(t *testing.T) {
	s := New(4)
	if err := s.Sample(make([]float32, 3), []Input{{Params: params(nil)}}, make([]Result, 1)); err == nil {
		t.Fatal("short logits accepted")
	}
	if err := s.Sample(make([]float32, 8), make([]Input, 2), make([]Result, 1)); err == nil {
		t.Fatal("short out accepted")
	}
	// All banned: no panic, some token.
	row := []float32{1, 2, 3, 4}
	p := params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.AllowedTokenIDs = []int32{99} })
	if err := s.Sample(row, []Input{{Params: p}}, make([]Result, 1)); err != nil {
		t.Fatal(err)
	}
}

func randRow(rng *rand.Rand, v int) []float32 {
	row := make([]float32, v)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 3)
	}
	return row
}

// Seeded draws depend on (seed, position) only: the same request gives the
// same token in any batch, at any row.
func TestSeedReproducibleAcrossBatches(t *testing.T) {
	const V = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	base := randRow(rng, V)
	p := params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.TopP = 0.9; p.TopK = 100 })
	hist := []int32{5, 6, 7, 8}
	req := Input{Params: p, History: hist, NumPrompt: 2, Seed: 1234}
	s := New(V)
	want := make([]Result, 1)
	if err := s.Sample(slices.Clone(base), []Input{req}, want); err != nil {
		t.Fatal(err)
	}
	for trial := range 20 {
		n := 2 + trial%7
		at := trial % n
		logits := make([]float32, 0, n*V)
		in := make([]Input, n)
		for i := range n {
			if i == at {
				logits = append(logits, base...)
				in[i] = req
				continue
			}
			logits = append(logits, randRow(rng, V)...)
			in[i] = Input{Params: p, History: hist[:3], NumPrompt: 1, Seed: uint64(trial*100 + i)}
		}
		out := make([]Result, n)
		if err := s.Sample(logits, in, out); err != nil {
			t.Fatal(err)
		}
		if out[at].Token != want[0].Token {
			t.Fatalf("trial %d: token %d at row %d, want %d", trial, out[at].Token, at, want[0].Token)
		}
	}
	// Another position draws independently.
	req2 := req
	req2.History = append(slices.Clone(hist), 9)
	seen := map[int32]bool{}
	for pos := range 50 {
		req2.History = append(req2.History[:4], make([]int32, pos)...)
		out := make([]Result, 1)
		s.Sample(slices.Clone(base), []Input{req2}, out)
		seen[out[0].Token] = true
	}
	if len(seen) < 5 {
		t.Fatalf("50 positions gave only %d distinct tokens", len(seen))
	}
}

func softmax(row []float32, temp float64) []float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, float64(v)/temp)
	}
	p := make([]float64, len(row))
	var z float64
	for i, v := range row {
		p[i] = math.Exp(float64(v)/temp - m)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// reference computes the allowed set and renormalised distribution the
// straightforward way (full sort).
func reference(row []float32, p *ipc.SamplingParams) map[int32]float64 {
	probs := softmax(row, float64(p.Temperature))
	ids := make([]int, len(row))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return probs[ids[a]] > probs[ids[b]] })
	keep := ids
	if p.MinP > 0 {
		var k []int
		for _, i := range keep {
			if probs[i] >= float64(p.MinP)*probs[ids[0]] {
				k = append(k, i)
			}
		}
		keep = k
	}
	if p.TopK > 0 && int(p.TopK) < len(keep) {
		keep = keep[:p.TopK]
	}
	var z float64
	for _, i := range keep {
		z += probs[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		var acc float64
		for n, i := range keep {
			acc += probs[i] / z
			if acc >= float64(p.TopP) {
				keep = keep[:n+1]
				break
			}
		}
	}
	z = 0
	for _, i := range keep {
		z += probs[i]
	}
	out := map[int32]float64{}
	for _, i := range keep {
		out[int32(i)] = probs[i] / z
	}
	return out
}

// The empirical distribution of many draws matches the reference, and no
// draw falls outside the allowed set.
func TestDistributionMatchesReference(t *testing.T) {
	const V = 64
	rng := rand.New(rand.NewPCG(3, 4))
	row := randRow(rng, V)
	cases := []struct {
		name string
		p    *ipc.SamplingParams
	}{
		{"temperature", params(func(p *ipc.SamplingParams) { p.Temperature = 1.3 })},
		{"top_k", params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.TopK = 5 })},
		{"top_p", params(func(p *ipc.SamplingParams) { p.Temperature = 0.8; p.TopP = 0.7 })},
		{"min_p", params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.MinP = 0.1 })},
		{"all", params(func(p *ipc.SamplingParams) { p.Temperature = 2; p.TopK = 20; p.TopP = 0.8; p.MinP = 0.02 })},
	}
	s := New(V)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := reference(row, tc.p)
			const draws = 40000
			got := map[int32]float64{}
			out := make([]Result, 1)
			for seed := range uint64(draws) {
				if err := s.Sample(slices.Clone(row), []Input{{Params: tc.p, Seed: seed}}, out); err != nil {
					t.Fatal(err)
				}
				got[out[0].Token]++
			}
			for tok, c := range got {
				if _, ok := want[tok]; !ok {
					t.Fatalf("drew token %d outside the allowed set (%d tokens)", tok, len(want))
				}
				f := c / draws
				if math.Abs(f-want[tok]) > 0.01+0.05*want[tok] {
					t.Errorf("token %d: frequency %.4f, want %.4f", tok, f, want[tok])
				}
			}
		})
	}
}

func TestSelectionMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 500 {
		n := 1 + rng.IntN(300)
		val := make([]float32, n)
		for i := range val {
			val[i] = float32(rng.IntN(20)) // many ties
		}
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		sorted := slices.Clone(val)
		slices.SortFunc(sorted, func(a, b float32) int { return -cmpF(a, b) })
		k := 1 + rng.IntN(n)
		v2, i2 := slices.Clone(val), slices.Clone(idx)
		selectTop(i2, v2, k)
		top := slices.Clone(v2[:k])
		slices.SortFunc(top, func(a, b float32) int { return -cmpF(a, b) })
		if !slices.Equal(top, sorted[:k]) {
			t.Fatalf("trial %d: selectTop(%d) = %v, want %v", trial, k, top, sorted[:k])
		}
		for j := range i2 {
			if val[i2[j]] != v2[j] {
				t.Fatalf("ids and values separated")
			}
		}
		// nucleus: smallest prefix of the sorted values reaching need.
		var total float64
		for _, v := range val {
			total += float64(v)
		}
		need := rng.Float64() * total
		wantN := 0
		var acc float64
		for wantN < n && (acc < need || wantN == 0) {
			acc += float64(sorted[wantN])
			wantN++
		}
		v3, i3 := slices.Clone(val), slices.Clone(idx)
		gotN := nucleus(i3, v3, need)
		var gotSum float64
		for _, v := range v3[:gotN] {
			gotSum += float64(v)
		}
		if gotN != wantN || math.Abs(gotSum-acc) > 1e-6 {
			t.Fatalf("trial %d: nucleus(%.2f) = %d (sum %.2f), want %d (sum %.2f)", trial, need, gotN, gotSum, wantN, acc)
		}
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestProcessors(t *testing.T) {
	base := []float32{2, -2, 1, 0.5, 3, -1}
	cases := []struct {
		name string
		p    *ipc.SamplingParams
		in   Input
		want []float32
	}{
		{"repetition prompt+output", params(func(p *ipc.SamplingParams) { p.RepetitionPenalty = 2 }),
			Input{History: []int32{0, 1, 1}, NumPrompt: 1}, []float32{1, -4, 1, 0.5, 3, -1}},
		{"frequency and presence on output only", params(func(p *ipc.SamplingParams) { p.FrequencyPenalty = 0.5; p.PresencePenalty = 1 }),
			Input{History: []int32{4, 2, 2, 3}, NumPrompt: 1}, []float32{2, -2, -1, -1, 3, -1}},
		{"logit_bias", params(func(p *ipc.SamplingParams) {
			p.LogitBias = []ipc.LogitBias{{Token: 1, Bias: 5}, {Token: 9, Bias: 1}}
		}), Input{}, []float32{2, 3, 1, 0.5, 3, -1}},
		{"allowed_token_ids", params(func(p *ipc.SamplingParams) { p.AllowedTokenIDs = []int32{1, 3} }),
			Input{}, []float32{negInf, -2, negInf, 0.5, negInf, negInf}},
		{"bad_words", params(func(p *ipc.SamplingParams) { p.BadWords = [][]int32{{5}, {3, 2}, {4, 0}} }),
			Input{History: []int32{3, 1, 3}, NumPrompt: 2}, []float32{2, -2, negInf, 0.5, 3, negInf}},
		{"min_tokens", params(func(p *ipc.SamplingParams) { p.MinTokens = 2; p.StopTokenIDs = []int32{3} }),
			Input{History: []int32{0, 1}, NumPrompt: 1, EOS: []int32{4}}, []float32{2, -2, 1, negInf, negInf, -1}},
		{"min_tokens ignore_eos", params(func(p *ipc.SamplingParams) { p.MinTokens = 2; p.IgnoreEOS = true }),
			Input{History: []int32{0, 1}, NumPrompt: 1, EOS: []int32{4}}, []float32{2, -2, 1, 0.5, 3, -1}},
		{"min_tokens reached", params(func(p *ipc.SamplingParams) { p.MinTokens = 1; p.StopTokenIDs = []int32{3} }),
			Input{History: []int32{0, 1}, NumPrompt: 1, EOS: []int32{4}}, []float32{2, -2, 1, 0.5, 3, -1}},
		{"mask", params(nil), Input{Mask: evenMask{}}, []float32{2, negInf, 1, negInf, 3, negInf}},
		{"bitset mask", params(nil), Input{Mask: bitsMask{0b010011}}, []float32{2, -2, negInf, negInf, 3, negInf}},
	}
	s := New(len(base))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			row := slices.Clone(base)
			in := tc.in
			in.Params = tc.p
			s.workers[0].process(row, &in, tc.p)
			if !slices.Equal(row, tc.want) {
				t.Fatalf("got %v, want %v", row, tc.want)
			}
		})
	}
}

type bitsMask []uint64

func (b bitsMask) Allowed(id int32) bool { return b[id>>6]&(1<<(uint(id)&63)) != 0 }
func (bitsMask) AllowedIDs() []int32     { return nil }
func (b bitsMask) Words() []uint64       { return b }

type evenMask struct{}

func (evenMask) Allowed(id int32) bool { return id%2 == 0 }
func (evenMask) AllowedIDs() []int32   { return nil }

func TestLogprobs(t *testing.T) {
	row := []float32{1, 3, 2, 3, 0}
	p := params(func(p *ipc.SamplingParams) { p.Logprobs = 3; p.LogitBias = []ipc.LogitBias{{Token: 4, Bias: 10}} })
	s := New(len(row))
	out := make([]Result, 1)
	if err := s.Sample(slices.Clone(row), []Input{{Params: p}}, out); err != nil {
		t.Fatal(err)
	}
	// The bias makes token 4 the greedy choice, but logprobs are raw.
	lp := out[0].Logprobs
	probs := softmax(row, 1)
	if out[0].Token != 4 || lp.Rank != 5 {
		t.Fatalf("token %d rank %d, want 4 and 5", out[0].Token, lp.Rank)
	}
	if math.Abs(float64(lp.Logprob)-math.Log(probs[4])) > 1e-5 {
		t.Fatalf("logprob %v, want %v", lp.Logprob, math.Log(probs[4]))
	}
	if !slices.Equal(lp.TopIDs, []int32{1, 3, 2}) {
		t.Fatalf("top ids %v, want [1 3 2]", lp.TopIDs)
	}
	for i, id := range lp.TopIDs {
		if math.Abs(float64(lp.TopLogprobs[i])-math.Log(probs[id])) > 1e-5 {
			t.Fatalf("top logprob %d: %v want %v", i, lp.TopLogprobs[i], math.Log(probs[id]))
		}
	}
	// Logprobs 0: the sampled token only.
	p.Logprobs = 0
	s.Sample(slices.Clone(row), []Input{{Params: p}}, out)
	if len(out[0].Logprobs.TopIDs) != 0 || out[0].Logprobs.Rank != 5 {
		t.Fatalf("logprobs=0 gave %+v", out[0].Logprobs)
	}
}

func TestExpNeg(t *testing.T) {
	for d := float32(0); d < 63; d += 0.001 {
		got, want := float64(expNeg(d)), math.Exp(-float64(d))
		if math.Abs(got-want) > 1e-6*want {
			t.Fatalf("expNeg(%v) = %v, want %v", d, got, want)
		}
	}
	if expNeg(float32(math.Inf(1))) != 0 || expNeg(float32(math.NaN())) != 0 || expNeg(100) != 0 {
		t.Fatal("expNeg of +inf, NaN or large d is not 0")
	}
}

func TestArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 200 {
		row := make([]float32, 1+rng.IntN(40))
		for i := range row {
			row[i] = float32(rng.IntN(5))
		}
		want := 0
		for i, v := range row {
			if v > row[want] {
				want = i
			}
		}
		if got := argmax(row); int(got) != want {
			t.Fatalf("trial %d: argmax(%v) = %d, want %d", trial, row, got, want)
		}
	}
	ninf := float32(math.Inf(-1))
	if argmax([]float32{ninf, ninf}) != 0 || argmax([]float32{float32(math.NaN()), 1}) != 1 {
		t.Fatal("argmax of -inf / NaN rows")
	}
}

// Spreading rows over workers changes nothing in the results.
func TestWorkersSameResults(t *testing.T) {
	const V, rows = 500, 64
	rng := rand.New(rand.NewPCG(11, 12))
	logits := make([]float32, 0, rows*V)
	in := make([]Input, rows)
	for i := range rows {
		logits = append(logits, randRow(rng, V)...)
		p := params(func(p *ipc.SamplingParams) {
			p.Temperature = float32(i%3) * 0.7
			p.TopP = 0.9
			p.TopK = int32(i % 40)
			p.Logprobs = int32(i%4) - 1
			p.RepetitionPenalty = 1.2
		})
		in[i] = Input{Params: p, History: []int32{int32(i), 3, 4}, NumPrompt: 1, Seed: uint64(i)}
	}
	one, four := New(V), New(V)
	four.SetWorkers(4)
	want, got := make([]Result, rows), make([]Result, rows)
	if err := one.Sample(slices.Clone(logits), in, want); err != nil {
		t.Fatal(err)
	}
	if err := four.Sample(slices.Clone(logits), in, got); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		w, g := want[i], got[i]
		if w.Token != g.Token || w.Logprobs.Rank != g.Logprobs.Rank || w.Logprobs.Logprob != g.Logprobs.Logprob ||
			!slices.Equal(w.Logprobs.TopIDs, g.Logprobs.TopIDs) || !slices.Equal(w.Logprobs.TopLogprobs, g.Logprobs.TopLogprobs) {
			t.Fatalf("row %d: %+v with 1 worker, %+v with 4", i, w, g)
		}
	}
}

// On a large vocabulary every draw stays inside the reference's top-k /
// top-p / min-p set, and the set is explored.
func TestSupportLargeVocab(t *testing.T) {
	const V = 5000
	rng := rand.New(rand.NewPCG(21, 22))
	row := randRow(rng, V)
	cases := []*ipc.SamplingParams{
		params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.TopP = 0.5 }),
		params(func(p *ipc.SamplingParams) { p.Temperature = 0.7; p.TopK = 100 }),
		params(func(p *ipc.SamplingParams) { p.Temperature = 1.5; p.TopK = 300; p.TopP = 0.3 }),
		params(func(p *ipc.SamplingParams) { p.Temperature = 1; p.MinP = 0.05; p.TopP = 0.95 }),
	}
	s := New(V)
	out := make([]Result, 1)
	for ci, p := range cases {
		want := reference(row, p)
		seen := map[int32]bool{}
		for seed := range uint64(3000) {
			if err := s.Sample(slices.Clone(row), []Input{{Params: p, Seed: seed}}, out); err != nil {
				t.Fatal(err)
			}
			if _, ok := want[out[0].Token]; !ok {
				t.Fatalf("case %d: token %d outside the %d-token reference set", ci, out[0].Token, len(want))
			}
			seen[out[0].Token] = true
		}
		if len(seen) < min(len(want), 20) {
			t.Fatalf("case %d: only %d of %d allowed tokens drawn", ci, len(seen), len(want))
		}
	}
}
