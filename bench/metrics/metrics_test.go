package metrics

import (
	"math"
	"testing"
)

func TestQuantileMatchesNumpy(t *testing.T) {
	// Expected values from numpy.percentile (linear interpolation).
	xs := []float64{1, 2, 3, 4}
	for _, tc := range []struct{ p, want float64 }{
		{0, 1}, {50, 2.5}, {90, 3.7}, {99, 3.97}, {100, 4}, {25, 1.75},
	} {
		if got := Quantile(xs, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	if got := Quantile(nil, 99); got != 0 {
		t.Errorf("Quantile(nil) = %v, want 0", got)
	}
	if got := Quantile([]float64{7}, 99); got != 7 {
		t.Errorf("Quantile([7]) = %v, want 7", got)
	}
}

func TestCompute(t *testing.T) {
	recs := []Record{
		{Success: true, PromptLen: 100, OutputTokens: 11, Start: 0, TTFT: 0.1, Latency: 0.6, ITL: []float64{0.25, 0.25}},
		{Success: true, PromptLen: 50, OutputTokens: 1, Start: 1.2, TTFT: 0.3, Latency: 0.3},
		{Success: false, Error: "x", PromptLen: 999},
		{Success: true, PromptLen: 10, OutputTokens: 3, Start: 0.4, TTFT: 0.2, Latency: 1.0, ITL: []float64{0.8}},
	}
	s := Compute(recs, 2, Options{Percentiles: []float64{50, 100}, Goodput: map[string]float64{TTFT: 250, TPOT: 100}})
	if s.Completed != 3 || s.Failed != 1 || s.TotalInput != 160 || s.TotalOutput != 15 {
		t.Fatalf("counts %+v", s)
	}
	if s.RequestThroughput != 1.5 || s.OutputThroughput != 7.5 || s.TotalTokenThroughput != 87.5 {
		t.Errorf("throughputs %v %v %v", s.RequestThroughput, s.OutputThroughput, s.TotalTokenThroughput)
	}
	// TPOT only for requests with more than one token: 50 ms and 400 ms.
	if d := s.Dists[TPOT]; math.Abs(d.Mean-225) > 1e-9 || math.Abs(d.Median-225) > 1e-9 || math.Abs(d.Std-175) > 1e-9 {
		t.Errorf("TPOT %+v, want mean/median 225 std 175", d)
	}
	// Goodput: request 1 (ttft 100, tpot 50) is good; request 2 has TTFT 300;
	// request 4 has TPOT 400. The 1-token request counts TPOT as 0.
	if s.RequestGoodput != 0.5 {
		t.Errorf("goodput %v, want 0.5", s.RequestGoodput)
	}
	if d := s.Dists[ITL]; math.Abs(d.Mean-1300.0/3) > 1e-9 {
		t.Errorf("ITL mean %v, want %v (pooled gaps)", d.Mean, 1300.0/3)
	}
	if v, ok := s.Dists[E2EL].At(100); !ok || math.Abs(v-1000) > 1e-9 {
		t.Errorf("E2EL p100 %v %v", v, ok)
	}
	if s.OutputLens[2] != 0 || s.OutputLens[0] != 11 {
		t.Errorf("output lens %v", s.OutputLens)
	}
	// Events: req1 at 0.1, 0.35, 0.6; req4 at 0.6, 1.4; req2 at 1.5.
	if s.PeakOutputTokensPerS != 4 {
		t.Errorf("peak tok/s %v, want 4", s.PeakOutputTokensPerS)
	}
	// Intervals [0,0.6) [0.4,1.4) [1.2,1.5): at most 2 overlap.
	if s.PeakConcurrentRequests != 2 {
		t.Errorf("peak concurrency %v, want 2", s.PeakConcurrentRequests)
	}
}

func TestComputeNoSuccess(t *testing.T) {
	s := Compute([]Record{{Error: "a"}, {Error: "b"}}, 1, Options{Percentiles: []float64{99}})
	if s.Completed != 0 || s.Failed != 2 || s.PeakConcurrentRequests != 0 || s.Dists[TTFT].Mean != 0 {
		t.Errorf("summary %+v", s)
	}
	if v, ok := s.Dists[ITL].At(99); !ok || v != 0 {
		t.Errorf("p99 ITL %v %v, want 0", v, ok)
	}
}

func TestParsers(t *testing.T) {
	g, err := ParseGoodput([]string{"ttft:50,tpot:10.5", "e2el:1000"})
	if err != nil || g[TTFT] != 50 || g[TPOT] != 10.5 || g[E2EL] != 1000 {
		t.Errorf("ParseGoodput = %v, %v", g, err)
	}
	for _, bad := range []string{"ttft", "ttft:x", "itl:5", "ttft:-1", "ttft:NaN"} {
		if _, err := ParseGoodput([]string{bad}); err == nil {
			t.Errorf("ParseGoodput(%q) accepted", bad)
		}
	}
	if ps, err := ParsePercentiles("50, 99.9"); err != nil || len(ps) != 2 || ps[1] != 99.9 {
		t.Errorf("ParsePercentiles = %v, %v", ps, err)
	}
	if PercentileLabel(99) != "99" || PercentileLabel(99.9) != "99.9" {
		t.Errorf("labels %q %q", PercentileLabel(99), PercentileLabel(99.9))
	}
}

// FuzzParseGoodput checks the SLO parser never panics and only returns
// known, non-negative SLOs.
func FuzzParseGoodput(f *testing.F) {
	f.Add("ttft:50 tpot:10")
	f.Add("e2el:1e3,ttft:0")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGoodput([]string{s})
		if err != nil {
			return
		}
		for k, v := range g {
			if (k != TTFT && k != TPOT && k != E2EL) || v < 0 || math.IsNaN(v) {
				t.Fatalf("ParseGoodput(%q) gave %s=%v", s, k, v)
			}
		}
	})
}
