package serve

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/bench/metrics"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestPrintResultGolden pins the printed block to vLLM's layout: a centred
// 50-wide banner, labels padded to 40 columns, values left-aligned in 10.
func TestPrintResultGolden(t *testing.T) {
	recs := []metrics.Record{
		{Success: true, PromptLen: 10, OutputTokens: 5, Start: 0, TTFT: 0.050, Latency: 0.090, ITL: []float64{0.01, 0.01, 0.01, 0.01}},
		{Success: true, PromptLen: 12, OutputTokens: 3, Start: 0.5, TTFT: 0.070, Latency: 0.130, ITL: []float64{0.03, 0.03}},
		{Error: "HTTP 500 Internal Server Error: boom"},
	}
	o := DefaultOptions()
	o.MaxConcurrency = 4
	o.RequestRate = 2
	o.Goodput = map[string]float64{metrics.TTFT: 60}
	o.PercentileMetrics = []string{metrics.TTFT, metrics.TPOT, metrics.ITL, metrics.E2EL}
	o.Percentiles = []float64{50, 99.9}
	r := &Result{Options: o, Records: recs, ClientCores: 0.125}
	r.Summary = metrics.Compute(recs, 2, metrics.Options{Percentiles: o.Percentiles, Goodput: o.Goodput})
	var b bytes.Buffer
	printErrors(&b, recs)
	printResult(&b, r)
	golden := filepath.Join("testdata", "result_block.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("result block differs from %s:\n--- got\n%s\n--- want\n%s", golden, b.String(), want)
	}
}

func TestCenter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{" Serving Benchmark Result ", "============ Serving Benchmark Result ============"},
		{"Time to First Token", "---------------Time to First Token----------------"},
		{"Time per Output Token (excl. 1st token)", "-----Time per Output Token (excl. 1st token)------"},
	} {
		c := byte('-')
		if tc.want[0] == '=' {
			c = '='
		}
		if got := center(tc.in, c); got != tc.want {
			t.Errorf("center(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFlags(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	raw := o.AddFlags(fs)
	args := JoinMultiValued([]string{
		"--base-url", "http://h:1/", "--endpoint", "/v1/chat/completions", "--goodput", "ttft:50", "tpot:10",
		"--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,90,99", "--request-rate", "inf",
		"--max-concurrency", "64", "--ignore-eos", "--stream-interval", "4", "--seed", "3",
	}, "goodput")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	if err := raw.Finish(&o); err != nil {
		t.Fatal(err)
	}
	if o.BaseURL != "http://h:1" || o.Endpoint != EndpointChat || o.Goodput[metrics.TTFT] != 50 || o.Goodput[metrics.TPOT] != 10 ||
		!slices.Equal(o.PercentileMetrics, []string{"ttft", "e2el"}) || !slices.Equal(o.Percentiles, []float64{50, 90, 99}) ||
		!math.IsInf(o.RequestRate, 1) || o.MaxConcurrency != 64 || !o.IgnoreEOS || o.StreamInterval != 4 || o.Seed != 3 || o.APIKey != "sk-test" {
		t.Errorf("parsed options %+v", o)
	}
	for _, bad := range [][]string{
		{"--endpoint", "/v1/embeddings"},
		{"--request-rate", "0"},
		{"--burstiness", "-1"},
		{"--dataset-name", "sharegpt"},
		{"--goodput", "ttft=5"},
		{"--metric-percentiles", "101"},
		{"--percentile-metrics", "latency"},
	} {
		o := DefaultOptions()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		raw := o.AddFlags(fs)
		if err := fs.Parse(bad); err != nil {
			continue
		}
		if err := raw.Finish(&o); err == nil {
			t.Errorf("flags %v accepted", bad)
		}
	}
}
