package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

// refTopSet is the reference top set: the ids with e > 0 sorted by e
// (descending, ties to the lowest id), cut at the first prefix whose mass
// (byMass) or size reaches need. It returns membership and, for mass, how
// far the prefix sums before and at the cut lie from need (to recognise a
// cut that float rounding may legitimately move).
func refTopSet(e []float32, byMass bool, need float64) (in []bool, gap float64) {
	ids := make([]int, 0, len(e))
	for i, x := range e {
		if x > 0 {
			ids = append(ids, i)
		}
	}
	slices.SortStableFunc(ids, func(a, b int) int { return -cmpF(e[a], e[b]) })
	in = make([]bool, len(e))
	var acc float64
	gap = math.Inf(1)
	for n, i := range ids {
		in[i] = true
		before := acc
		acc += float64(e[i])
		if byMass && acc >= need {
			gap = min(need-before, acc-need)
			break
		}
		if !byMass && n+1 >= int(need) {
			break
		}
	}
	return in, gap
}

// refDraw draws from the members of in, in id order, by mass e. gap is how
// far, relative to the total, target lies from the drawn token's ends of
// the running sum: a float-rounding-sized gap may legitimately flip the
// draw to a neighbour.
func refDraw(e []float32, in []bool, u float64) (tok int32, gap float64) {
	var total float64
	for i, x := range e {
		if in[i] {
			total += float64(x)
		}
	}
	target, acc, last := u*total, 0.0, -1
	for i, x := range e {
		if in[i] {
			before := acc
			acc += float64(x)
			last = i
			if acc > target {
				return int32(i), min(target-before, acc-target) / total
			}
		}
	}
	return int32(last), 0
}

// selectRow makes logits of one of several shapes: flat or peaked normal,
// bf16-rounded (many exact ties) or small integers (huge ties).
func selectRow(rng *rand.Rand, v, shape int) []float32 {
	row := make([]float32, v)
	for i := range row {
		x := rng.NormFloat64() * []float64{0.5, 2, 5, 2, 1}[shape]
		switch shape {
		case 3: // bf16
			x = float64(math.Float32frombits(math.Float32bits(float32(x)) &^ 0xffff))
		case 4:
			x = math.Round(x * 2)
		}
		row[i] = float32(x)
	}
	if shape == 2 && v > 1 {
		row[rng.IntN(v)] += 12
	}
	return row
}

// drawTol bounds how close (relative to the total mass) a uniform draw's
// target may lie to a token boundary of the float64 reference for the
// sampler to pick the neighbour: sums of probabilities are float32 within
// 64-element runs and float64 beyond (about 1e-7 relative).
const drawTol = 2e-6

// The threshold search picks exactly the reference top-k / top-p set (a
// mass cut may differ only where the reference's prefix sum lies within
// float rounding of the target), and a draw from it picks the reference's
// token for the same uniform number.
func TestThresholdMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	sizes := []int{1, 15, 17, 100, 1000, 5000, 32000, 32007}
	for trial := range 400 {
		V := sizes[trial%len(sizes)]
		shape := trial / len(sizes) % 5
		row := selectRow(rng, V, shape)
		temp := []float32{0.3, 0.8, 1.5}[trial%3]
		lo := float32(expLo)
		if trial%4 == 0 {
			lo = float32(math.Log(0.01)) // min_p 0.01
		}
		w := newWorker(V)
		e := w.e[:V]
		_, z, npos := w.expRow(e, row, 1/temp, lo)
		byMass := trial%2 == 0
		var need float64
		if byMass {
			need = []float64{0.3, 0.73, 0.9, 0.95, 0.999}[rng.IntN(5)] * z
			if need <= 1 {
				continue // the sampler's shortcut (the first top token)
			}
		} else {
			need = float64(1 + rng.IntN(max(1, min(npos-1, 3000))))
			if int(need) >= npos {
				continue // the sampler keeps everything
			}
		}
		want, gap := refTopSet(e, byMass, need)
		th, r, mass := w.threshold(e, byMass, need, z, npos)
		got := make([]bool, V)
		ties := r
		for i, x := range e {
			switch {
			case x > th:
				got[i] = true
			case x == th && ties > 0:
				got[i] = true
				ties--
			}
		}
		var wantMass float64
		for i, x := range e {
			if want[i] {
				wantMass += float64(x)
			}
		}
		if !slices.Equal(got, want) {
			if byMass && gap <= drawTol*z {
				continue
			}
			var ng, nw int
			for i := range got {
				ng += b2i(got[i])
				nw += b2i(want[i])
			}
			t.Fatalf("trial %d (V %d shape %d mass %v need %v): set of %d (t %v r %d), want %d", trial, V, shape, byMass, need, ng, th, r, nw)
		}
		if math.Abs(mass-wantMass) > drawTol*wantMass {
			t.Fatalf("trial %d: set mass %v, want %v", trial, mass, wantMass)
		}
		for range 20 {
			u := rng.Float64()
			wt, gap := refDraw(e, want, u)
			if g := w.drawAbove(e, th, u*mass); g != wt && gap > drawTol {
				t.Fatalf("trial %d: drew %d, want %d (u %v)", trial, g, wt, u)
			}
		}
		// Plain temperature: the draw over every candidate (drawChunks
		// uses the chunk sums of expRow, which threshold overwrote).
		w.expRow(e, row, 1/temp, lo)
		all := make([]bool, V)
		for i, x := range e {
			all[i] = x > 0
		}
		for range 20 {
			u := rng.Float64()
			wt, gap := refDraw(e, all, u)
			if g := w.drawChunks(e, u*z); g != wt && gap > drawTol {
				t.Fatalf("trial %d: temperature drew %d, want %d (u %v)", trial, g, wt, u)
			}
		}
	}
}

// The vectorised logprobs agree with the plain loop: the same rank and
// top ids (ties to the lowest id), logprobs within float rounding.
func TestLogprobsMatchScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for trial := range 200 {
		V := []int{1, 7, 100, 3000, 32000, 32011}[trial%6]
		var row []float32
		if trial%3 == 0 {
			row = kernelRow(rng, V) // NaN, -inf, +inf, ties
		} else {
			row = selectRow(rng, V, trial%5)
		}
		w := newWorker(V)
		copy(w.raw, row)
		tok := int32(rng.IntN(V))
		k := rng.IntN(MaxTopLogprobs + 1)
		var got, want ipc.TokenLogprobs
		ids, lps := make([]int32, 0, k), make([]float32, 0, k)
		w.logprobs(tok, k, &got, ids, lps)
		w.logprobsScalar(tok, k, &want, make([]int32, 0, k), make([]float32, 0, k))
		close := func(a, b float32) bool {
			return a == b || (a != a && b != b) || math.Abs(float64(a-b)) <= 1e-5*max(1, math.Abs(float64(b)))
		}
		if got.Rank != want.Rank || !close(got.Logprob, want.Logprob) {
			t.Fatalf("trial %d: logprob %v rank %d, want %v %d", trial, got.Logprob, got.Rank, want.Logprob, want.Rank)
		}
		if !slices.Equal(got.TopIDs, want.TopIDs) {
			t.Fatalf("trial %d: top ids %v, want %v", trial, got.TopIDs, want.TopIDs)
		}
		for i := range got.TopLogprobs {
			if !close(got.TopLogprobs[i], want.TopLogprobs[i]) {
				t.Fatalf("trial %d: top logprob %d: %v, want %v", trial, i, got.TopLogprobs[i], want.TopLogprobs[i])
			}
		}
	}
}

// A steady-state step allocates nothing on one worker, whatever the
// parameters.
func TestSampleAllocFree(t *testing.T) {
	const V, rows = 32000, 4
	rng := rand.New(rand.NewPCG(61, 62))
	src := make([]float32, 0, rows*V)
	for range rows {
		src = append(src, selectRow(rng, V, 1)...)
	}
	hist := []int32{1, 2, 3, 2, 9}
	for _, p := range []ipc.SamplingParams{
		{Logprobs: -1},
		{Temperature: 0.8, Logprobs: -1},
		{Temperature: 0.8, TopP: 0.9, Logprobs: -1},
		{Temperature: 0.8, TopK: 50, Logprobs: -1},
		{Temperature: 0.8, TopK: 50, TopP: 0.9, MinP: 0.01, Logprobs: 5},
		{RepetitionPenalty: 1.1, FrequencyPenalty: 0.2, PresencePenalty: 0.2, Logprobs: 20},
	} {
		s := New(V)
		in := make([]Input, rows)
		for i := range in {
			in[i] = Input{Params: &p, History: hist, NumPrompt: 2, Seed: uint64(i)}
		}
		out := make([]Result, rows)
		logits := make([]float32, len(src))
		step := func() {
			copy(logits, src)
			if err := s.Sample(logits, in, out); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%+v: %v allocations per step", p, n)
		}
	}
}

// expRow gives exactly the chunk-wise exps against the row's maximum,
// whatever the maximum's position, with -inf and NaN runs.
func TestExpRowMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for trial := range 60 {
		V := []int{5, 1000, 5000, 32000, 32007}[trial%5]
		row := selectRow(rng, V, trial%5)
		switch trial % 4 {
		case 1: // rising: every chunk raises the maximum
			for i := range row {
				row[i] += float32(i) / 100
			}
		case 2: // the maximum in the first chunk, -inf runs
			row[0] = 100
			for i := V / 3; i < V/2; i++ {
				row[i] = negInf
			}
		case 3:
			for i := 0; i < V/2; i++ {
				row[i] = float32(math.NaN())
			}
		}
		w := newWorker(V)
		m, z, npos := w.expRow(w.e[:V], row, 1.3, expLo)
		if want := maxOf(row); m != want {
			t.Fatalf("trial %d: max %v, want %v", trial, m, want)
		}
		want := make([]float32, V)
		var l lanes32
		wz, wc := 0.0, 0
		for a := 0; a < V; a += chunk {
			b := min(a+chunk, V)
			cz, cc := expChunk(want[a:b], row[a:b], m, 1.3, expLo, &l)
			wz += cz
			wc += cc
		}
		if !slices.Equal(w.e[:V], want) || z != wz || npos != wc {
			t.Fatalf("trial %d: expRow differs from exps against the maximum (sum %v %v, count %d %d)", trial, z, wz, npos, wc)
		}
	}
	// Infinite maxima: nothing computed, the caller takes argmax.
	w := newWorker(3)
	if m, _, n := w.expRow(w.e[:3], []float32{1, posInf, 2}, 1, expLo); m != posInf || n != 0 {
		t.Fatalf("+inf row: max %v count %d", m, n)
	}
	if m, _, n := w.expRow(w.e[:2], []float32{negInf, float32(math.NaN())}, 1, expLo); m != negInf || n != 0 {
		t.Fatalf("-inf row: max %v count %d", m, n)
	}
}
