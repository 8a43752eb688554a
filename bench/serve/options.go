// Package serve runs an online serving benchmark against any
// OpenAI-compatible server, the Go counterpart of `vllm bench serve`: it
// sends streamed completions or chat completions with a chosen arrival
// process and concurrency cap, times every SSE event on the client, and
// prints vLLM's result block.
//
// Timing follows vLLM's client (vllm/benchmarks/lib/endpoint_request_func.py):
// TTFT runs from sending the request to the first SSE event whose "choices"
// is non-empty (for chat that is the role chunk, and reasoning deltas count
// like content); each later such event adds one ITL sample however many
// tokens it carries; E2EL ends at the last such event (the usage chunk does
// not count); output tokens come from the usage chunk. Where Sluice differs,
// on purpose:
//   - an error event inside a 200 stream (`data: {"error":…}`) fails the
//     request (vLLM's client counts it a success);
//   - a body cut off mid-stream fails the request ("read stream: unexpected
//     EOF");
//   - without usage or a tokenizer, output tokens are the chunk count (vLLM
//     uses 1);
//   - failures are summarised by message with counts, and the client's own
//     CPU use is reported ("Client CPU (cores used):").
package serve

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/sluice-llm/sluice/bench/dataset"
	"github.com/sluice-llm/sluice/bench/metrics"
)

// Endpoints the benchmark can drive.
const (
	EndpointCompletions = "/v1/completions"
	EndpointChat        = "/v1/chat/completions"
)

// Options configure one benchmark run. DefaultOptions gives vLLM's defaults.
type Options struct {
	BaseURL  string // e.g. http://127.0.0.1:8000
	Endpoint string // EndpointCompletions or EndpointChat
	Model    string // empty: the first model of GET /v1/models
	APIKey   string // sent as a Bearer token when set

	// TokenizerName names the --tokenizer given (recorded in the result);
	// Tokenizer is the loaded tokenizer, nil for none.
	TokenizerName string
	Tokenizer     dataset.Tokenizer

	DatasetName      string // random, sharegpt or custom
	DatasetPath      string
	NumPrompts       int
	RandomInputLen   int
	RandomOutputLen  int
	RandomRangeRatio float64
	// OutputLen overrides the output length of file datasets (0: keep).
	OutputLen int

	MaxConcurrency int     // 0: unlimited
	RequestRate    float64 // requests/s; +Inf sends everything at once
	Burstiness     float64 // gamma shape; 1 is Poisson
	Seed           uint64
	IgnoreEOS      bool
	// StreamInterval, when > 0, is sent as "stream_interval" (a Sluice
	// extension: tokens coalesced per SSE chunk).
	StreamInterval int

	PercentileMetrics []string  // subset of ttft, tpot, itl, e2el
	Percentiles       []float64 // e.g. 50, 90, 99
	Goodput           map[string]float64

	RequestIDPrefix string
	ResultJSON      string // write the result here when set
	DisableProgress bool
	// ReadyTimeoutSec bounds the initial test request's retries; 0 skips
	// the ready check.
	ReadyTimeoutSec float64
	Label           string
}

// DefaultOptions returns vLLM's defaults.
func DefaultOptions() Options {
	return Options{
		BaseURL:           "http://127.0.0.1:8000",
		Endpoint:          EndpointCompletions,
		DatasetName:       "random",
		NumPrompts:        1000,
		RandomInputLen:    1024,
		RandomOutputLen:   128,
		RequestRate:       math.Inf(1),
		Burstiness:        1,
		PercentileMetrics: []string{metrics.TTFT, metrics.TPOT, metrics.ITL},
		Percentiles:       []float64{99},
		RequestIDPrefix:   "bench-",
		ReadyTimeoutSec:   600,
	}
}

// Validate reports bad or contradictory options.
func (o *Options) Validate() error {
	var errs []error
	if o.BaseURL == "" {
		errs = append(errs, errors.New("--base-url is required"))
	}
	if o.Endpoint != EndpointCompletions && o.Endpoint != EndpointChat {
		errs = append(errs, fmt.Errorf("--endpoint %q: want %s or %s", o.Endpoint, EndpointCompletions, EndpointChat))
	}
	switch o.DatasetName {
	case "random":
	case "sharegpt", "custom":
		if o.DatasetPath == "" {
			errs = append(errs, fmt.Errorf("--dataset-name %s needs --dataset-path", o.DatasetName))
		}
	default:
		errs = append(errs, fmt.Errorf("--dataset-name %q: want random, sharegpt or custom", o.DatasetName))
	}
	if o.NumPrompts < 1 {
		errs = append(errs, errors.New("--num-prompts must be at least 1"))
	}
	if o.MaxConcurrency < 0 {
		errs = append(errs, errors.New("--max-concurrency must be >= 0"))
	}
	if !(o.RequestRate > 0) {
		errs = append(errs, errors.New("--request-rate must be > 0 (inf for all at once)"))
	}
	if !(o.Burstiness > 0) {
		errs = append(errs, errors.New("--burstiness must be > 0"))
	}
	if o.StreamInterval < 0 {
		errs = append(errs, errors.New("--stream-interval must be >= 0"))
	}
	return errors.Join(errs...)
}

// Flags holds raw flag values that need parsing after flag.Parse.
type Flags struct {
	percentileMetrics string
	percentiles       string
	goodput           string
}

// AddFlags registers vLLM's `bench serve` flags on fs, writing into o, and
// returns the raw values Finish completes.
func (o *Options) AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{percentileMetrics: "ttft,tpot,itl", percentiles: "99"}
	fs.StringVar(&o.BaseURL, "base-url", o.BaseURL, "server base URL")
	fs.StringVar(&o.Endpoint, "endpoint", o.Endpoint, "API endpoint: /v1/completions or /v1/chat/completions")
	fs.StringVar(&o.Model, "model", o.Model, "model name (default: first model of /v1/models)")
	fs.StringVar(&o.TokenizerName, "tokenizer", o.TokenizerName, "tokenizer directory or file for prompt building and token counts (default: random prompts from the server's tokenizer via /v1/models, /tokenize and /detokenize)")
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "API key (default $OPENAI_API_KEY)")
	fs.StringVar(&o.DatasetName, "dataset-name", o.DatasetName, "random, sharegpt or custom")
	fs.StringVar(&o.DatasetPath, "dataset-path", o.DatasetPath, "ShareGPT JSON, or JSONL/JSON of {\"prompt\": …} for custom")
	fs.IntVar(&o.NumPrompts, "num-prompts", o.NumPrompts, "number of prompts to send")
	fs.IntVar(&o.RandomInputLen, "random-input-len", o.RandomInputLen, "random dataset: input tokens")
	fs.IntVar(&o.RandomOutputLen, "random-output-len", o.RandomOutputLen, "random dataset: output tokens")
	fs.Float64Var(&o.RandomRangeRatio, "random-range-ratio", o.RandomRangeRatio, "random dataset: lengths drawn from [len*(1-r), len*(1+r)]")
	fs.IntVar(&o.OutputLen, "output-len", o.OutputLen, "sharegpt/custom: override output tokens")
	fs.IntVar(&o.MaxConcurrency, "max-concurrency", o.MaxConcurrency, "maximum requests in flight (0: unlimited)")
	fs.Float64Var(&o.RequestRate, "request-rate", o.RequestRate, "requests per second (inf: all at once)")
	fs.Float64Var(&o.Burstiness, "burstiness", o.Burstiness, "gamma shape of arrival gaps (1: Poisson)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "random seed")
	fs.BoolVar(&o.IgnoreEOS, "ignore-eos", o.IgnoreEOS, "send ignore_eos so every request generates its full output length")
	fs.IntVar(&o.StreamInterval, "stream-interval", o.StreamInterval, "send stream_interval N (Sluice extension; 0: omit)")
	fs.StringVar(&f.percentileMetrics, "percentile-metrics", f.percentileMetrics, "comma-separated metrics to report: ttft,tpot,itl,e2el")
	fs.StringVar(&f.percentiles, "metric-percentiles", f.percentiles, "comma-separated percentiles, e.g. 50,90,99")
	fs.StringVar(&f.goodput, "goodput", f.goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS")
	fs.StringVar(&o.RequestIDPrefix, "request-id-prefix", o.RequestIDPrefix, "x-request-id prefix")
	fs.StringVar(&o.ResultJSON, "result-json", o.ResultJSON, "write the result as JSON to this file")
	fs.BoolVar(&o.DisableProgress, "disable-tqdm", o.DisableProgress, "no progress bar")
	fs.Float64Var(&o.ReadyTimeoutSec, "ready-check-timeout-sec", o.ReadyTimeoutSec, "retry the initial test request this long (0: skip it)")
	fs.StringVar(&o.Label, "label", o.Label, "label recorded in the result")
	return f
}

// Finish parses the list-valued flags into o and fills the API key from
// $OPENAI_API_KEY when not given.
func (f *Flags) Finish(o *Options) error {
	var err error
	if o.PercentileMetrics, err = metrics.ParseMetricNames(f.percentileMetrics); err != nil {
		return err
	}
	if o.Percentiles, err = metrics.ParsePercentiles(f.percentiles); err != nil {
		return err
	}
	if o.Goodput, err = metrics.ParseGoodput([]string{f.goodput}); err != nil {
		return err
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	return o.Validate()
}

// JoinMultiValued rewrites vLLM-style multi-value flags ("--goodput ttft:50
// tpot:10") into single values ("--goodput=ttft:50,tpot:10") so the
// standard flag package can parse them.
func JoinMultiValued(args []string, names ...string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		multi := false
		for _, n := range names {
			if a == "--"+n || a == "-"+n {
				multi = true
			}
		}
		if !multi {
			out = append(out, a)
			continue
		}
		var vals []string
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			vals = append(vals, args[i])
		}
		out = append(out, a+"="+strings.Join(vals, ","))
	}
	return out
}
