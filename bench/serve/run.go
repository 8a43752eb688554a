package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-llm/sluice/bench/dataset"
	"github.com/sluice-llm/sluice/bench/metrics"
)

// Result is the outcome of a benchmark run.
type Result struct {
	Options Options
	// Model is the model name the requests carried.
	Model string
	// Summary holds the aggregate metrics.
	Summary metrics.Summary
	// Records holds one entry per request, in dataset order.
	Records []metrics.Record
	// Texts holds each request's generated text.
	Texts []string
	// ClientCPUSeconds is the CPU time (user+system) this process spent
	// during the timed run; ClientCores is that divided by the duration.
	ClientCPUSeconds float64
	ClientCores      float64
}

// Run benchmarks the server o describes, printing progress lines and vLLM's
// result block to stdout and the progress bar to stderr. It writes
// o.ResultJSON when set. A cancelled ctx fails the outstanding requests and
// the run reports what it has.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	promptTok := o.Tokenizer
	if promptTok == nil && o.DatasetName == "random" {
		st, err := waitServerTokenizer(ctx, &o)
		switch {
		case err == nil:
			promptTok = st
			fmt.Fprintf(stdout, "Random prompts from the server's tokenizer (vocabulary of %d).\n", st.VocabSize())
		case errors.Is(err, errNoServerTokenizer):
			fmt.Fprintf(stdout, "No --tokenizer and %v: random prompts use generic ids/words.\n", err)
		default:
			return nil, err
		}
	}
	samples, err := buildSamples(&o, promptTok, rng)
	if st, ok := promptTok.(*serverTokenizer); ok {
		st.close()
	}
	if err != nil {
		return nil, err
	}
	conns := len(samples)
	if o.MaxConcurrency > 0 {
		conns = min(conns, o.MaxConcurrency)
	}
	c := newClient(&o, conns)
	defer c.http.CloseIdleConnections()

	model := o.Model
	if model == "" {
		if model, err = firstModel(ctx, c.http, o.BaseURL, o.APIKey); err != nil {
			return nil, err
		}
	}
	bodies := make([][]byte, len(samples))
	for i, s := range samples {
		if bodies[i], err = body(&o, model, s); err != nil {
			return nil, err
		}
	}

	if o.ReadyTimeoutSec > 0 {
		fmt.Fprintln(stdout, "Starting initial single prompt test run...")
		if err := readyCheck(ctx, c, bodies[0], o); err != nil {
			return nil, err
		}
		fmt.Fprintln(stdout, "Initial test run completed.")
	} else {
		fmt.Fprintln(stdout, "Skipping endpoint ready check.")
	}
	fmt.Fprintln(stdout, "Starting main benchmark run...")
	dist := "Gamma distribution"
	if o.Burstiness == 1 {
		dist = "Poisson process"
	}
	fmt.Fprintf(stdout, "Traffic request rate: %s\n", pyFloat(o.RequestRate))
	fmt.Fprintf(stdout, "Burstiness factor: %s (%s)\n", pyFloat(o.Burstiness), dist)
	if o.MaxConcurrency > 0 {
		fmt.Fprintf(stdout, "Maximum request concurrency: %d\n", o.MaxConcurrency)
	} else {
		fmt.Fprintln(stdout, "Maximum request concurrency: None")
	}

	arrivals := ArrivalTimes(len(samples), o.RequestRate, o.Burstiness, rng)
	recs := make([]metrics.Record, len(samples))
	texts := make([]string, len(samples))
	for i := range recs {
		recs[i] = metrics.Record{PromptLen: samples[i].PromptLen, ITL: make([]float64, 0, samples[i].OutputLen)}
	}
	var done atomic.Int64
	var bar *progress
	if !o.DisableProgress {
		bar = startProgress(stderr, len(samples), &done)
	}

	var sem chan struct{}
	if o.MaxConcurrency > 0 {
		sem = make(chan struct{}, o.MaxConcurrency)
	}
	cpu0 := processCPU()
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range samples {
		if wait := time.Until(t0.Add(time.Duration(arrivals[i] * float64(time.Second)))); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		arrived := time.Since(t0)
		wg.Go(func() {
			defer done.Add(1)
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					recs[i].Error = fmt.Sprintf("wait for a concurrency slot: %v", ctx.Err())
					return
				}
			}
			started := time.Since(t0)
			recs[i].Start = started.Seconds()
			recs[i].QueueTime = (started - arrived).Seconds()
			texts[i] = c.do(ctx, bodies[i], i, o.Tokenizer, &recs[i])
		})
	}
	wg.Wait()
	duration := time.Since(t0)
	cpu := processCPU() - cpu0
	if bar != nil {
		bar.stop()
	}

	res := &Result{
		Options:          o,
		Model:            model,
		Records:          recs,
		Texts:            texts,
		ClientCPUSeconds: cpu.Seconds(),
		ClientCores:      cpu.Seconds() / duration.Seconds(),
	}
	res.Summary = metrics.Compute(recs, duration.Seconds(), metrics.Options{Percentiles: o.Percentiles, Goodput: o.Goodput})
	printErrors(stdout, recs)
	printResult(stdout, res)
	if o.ResultJSON != "" {
		if err := writeJSON(o.ResultJSON, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// waitServerTokenizer asks the server for its tokenizer, retrying while
// the server cannot be reached and the ready timeout has not passed.
func waitServerTokenizer(ctx context.Context, o *Options) (*serverTokenizer, error) {
	deadline := time.Now().Add(time.Duration(o.ReadyTimeoutSec * float64(time.Second)))
	for {
		st, err := newServerTokenizer(ctx, o)
		if err == nil || errors.Is(err, errNoServerTokenizer) || time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// buildSamples builds the dataset o names; the random dataset's prompts
// come from promptTok when it is non-nil (the --tokenizer or the server's).
func buildSamples(o *Options, promptTok dataset.Tokenizer, rng *rand.Rand) ([]dataset.Sample, error) {
	if o.DatasetName == "random" {
		samples, err := dataset.Random(dataset.RandomOptions{
			NumPrompts: o.NumPrompts,
			InputLen:   o.RandomInputLen,
			OutputLen:  o.RandomOutputLen,
			RangeRatio: o.RandomRangeRatio,
			PromptIDs:  o.Endpoint == EndpointCompletions,
		}, promptTok, rng)
		if st, ok := promptTok.(*serverTokenizer); ok && st.err != nil {
			return nil, fmt.Errorf("random dataset: %w", st.err)
		}
		return samples, err
	}
	return dataset.Load(o.DatasetName, o.DatasetPath, dataset.FileOptions{NumPrompts: o.NumPrompts, OutputLen: o.OutputLen}, o.Tokenizer, rng)
}

// readyCheck sends the first request until it succeeds or the ready timeout
// passes, as vLLM's wait_for_endpoint does.
func readyCheck(ctx context.Context, c *client, reqBody []byte, o Options) error {
	deadline := time.Now().Add(time.Duration(o.ReadyTimeoutSec * float64(time.Second)))
	for {
		var rec metrics.Record
		c.do(ctx, reqBody, -1, nil, &rec)
		if rec.Success {
			return nil
		}
		// A client error (bad arguments: unknown model, prompt ids out of
		// the vocabulary, …) will not go away by waiting for readiness.
		clientError := rec.HTTPStatus >= 400 && rec.HTTPStatus < 500 &&
			rec.HTTPStatus != http.StatusRequestTimeout && rec.HTTPStatus != http.StatusTooManyRequests
		if clientError || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("initial test run failed - please make sure benchmark arguments are correctly specified: %s", rec.Error)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// pyFloat formats f as Python's str(float) does for the values printed
// here: "inf", "1.0", "2.5".
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case f == math.Trunc(f) && math.Abs(f) < 1e16:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprint(f)
}

// writeJSON writes the result in vLLM's --save-result layout plus the
// client CPU figures.
func writeJSON(path string, r *Result) error {
	b, err := json.MarshalIndent(ResultMap(r), "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// ResultMap returns the result as vLLM's result JSON keys (duration,
// completed, mean_ttft_ms, p99_itl_ms, per-request arrays, …) plus
// client_cpu_seconds, client_cpu_cores and error_summary.
func ResultMap(r *Result) map[string]any {
	s, o := r.Summary, r.Options
	n := len(r.Records)
	inputLens, ttfts, latencies, starts, queues := make([]int, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	itls, errs := make([][]float64, n), make([]string, n)
	for i, rec := range r.Records {
		inputLens[i], ttfts[i], latencies[i] = rec.PromptLen, rec.TTFT, rec.Latency
		starts[i], queues[i], itls[i], errs[i] = rec.Start, rec.QueueTime, rec.ITL, rec.Error
	}
	var goodput any
	if len(o.Goodput) > 0 {
		goodput = s.RequestGoodput
	}
	var maxConc any
	if o.MaxConcurrency > 0 {
		maxConc = o.MaxConcurrency
	}
	m := map[string]any{
		"date":                    time.Now().Format("20060102-150405"),
		"backend":                 "openai",
		"endpoint_type":           endpointType(o.Endpoint),
		"label":                   o.Label,
		"model_id":                r.Model,
		"tokenizer_id":            o.TokenizerName,
		"num_prompts":             n,
		"request_rate":            jsonFloat(o.RequestRate),
		"burstiness":              jsonFloat(o.Burstiness),
		"max_concurrency":         maxConc,
		"duration":                s.Duration,
		"completed":               s.Completed,
		"failed":                  s.Failed,
		"total_input_tokens":      s.TotalInput,
		"total_output_tokens":     s.TotalOutput,
		"request_throughput":      s.RequestThroughput,
		"request_goodput":         goodput,
		"output_throughput":       s.OutputThroughput,
		"total_token_throughput":  s.TotalTokenThroughput,
		"max_output_tokens_per_s": s.PeakOutputTokensPerS,
		"max_concurrent_requests": s.PeakConcurrentRequests,
		"input_lens":              inputLens,
		"output_lens":             s.OutputLens,
		"ttfts":                   ttfts,
		"itls":                    itls,
		"latencies":               latencies,
		"start_times":             starts,
		"queue_times":             queues,
		"generated_texts":         r.Texts,
		"errors":                  errs,
		"client_cpu_seconds":      r.ClientCPUSeconds,
		"client_cpu_cores":        r.ClientCores,
		"error_summary":           summarizeErrors(r.Records),
	}
	for _, name := range o.PercentileMetrics {
		d := s.Dists[name]
		m["mean_"+name+"_ms"] = d.Mean
		m["median_"+name+"_ms"] = d.Median
		m["std_"+name+"_ms"] = d.Std
		for _, p := range d.Percentiles {
			m["p"+metrics.PercentileLabel(p.P)+"_"+name+"_ms"] = p.Value
		}
	}
	return m
}

// jsonFloat returns f, or "inf" for +Inf, which JSON cannot carry (vLLM
// writes Python's float("inf") the same way).
func jsonFloat(f float64) any {
	if math.IsInf(f, 1) {
		return "inf"
	}
	return f
}

// endpointType names the endpoint as vLLM's --backend does.
func endpointType(endpoint string) string {
	if endpoint == EndpointChat {
		return "openai-chat"
	}
	return "openai"
}
