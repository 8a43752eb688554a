// Package metrics turns per-request benchmark records into the aggregate
// figures `vllm bench serve` reports, computed the way vLLM computes them
// (vllm/benchmarks/serve.py, calculate_metrics): TTFT, TPOT excluding the
// first token, per-chunk ITL pooled across requests, E2E latency, request,
// output and total token throughput, goodput against SLOs, peak output
// tokens per second and peak concurrent requests.
package metrics

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Record is the client-side outcome of one request. Times are in seconds.
type Record struct {
	// Success is false for HTTP errors, transport errors, errors inside the
	// stream and streams that never carried a choice.
	Success bool
	// Error says why a failed request failed.
	Error string
	// HTTPStatus is the response's status code (0 when none arrived).
	HTTPStatus int
	// PromptLen is the prompt's token count (the server's usage figure when
	// it reported one).
	PromptLen int
	// OutputTokens is the number of generated tokens (usage, else a
	// tokenizer count of the text, else the chunk count).
	OutputTokens int
	// Start is when the request was sent, relative to the benchmark start.
	Start float64
	// QueueTime is how long the request waited for a concurrency slot.
	QueueTime float64
	// TTFT is the time from sending to the first event with choices.
	TTFT float64
	// Latency (E2EL) is the time from sending to the last event with choices.
	Latency float64
	// ITL holds the gaps between consecutive events with choices: one per
	// chunk, however many tokens a chunk carries.
	ITL []float64
}

// Names of the per-request metrics that take percentiles.
const (
	TTFT = "ttft"
	TPOT = "tpot"
	ITL  = "itl"
	E2EL = "e2el"
)

// Dist summarises one latency metric, in milliseconds.
type Dist struct {
	Mean, Median, Std float64
	// Percentiles holds one value per requested percentile, in the order
	// they were requested.
	Percentiles []Percentile
}

// Percentile is one (p, value in ms) pair.
type Percentile struct {
	P     float64
	Value float64
}

// At returns the value for percentile p, and whether it was computed.
func (d Dist) At(p float64) (float64, bool) {
	for _, q := range d.Percentiles {
		if q.P == p {
			return q.Value, true
		}
	}
	return 0, false
}

// Summary is the aggregate result of a benchmark run.
type Summary struct {
	Completed, Failed                      int
	TotalInput, TotalOutput                int
	Duration                               float64 // seconds
	RequestThroughput                      float64 // req/s
	RequestGoodput                         float64 // req/s meeting every SLO
	OutputThroughput, TotalTokenThroughput float64 // tok/s
	// PeakOutputTokensPerS is the most events with choices in one
	// one-second bucket (vLLM counts one per chunk).
	PeakOutputTokensPerS float64
	// PeakConcurrentRequests is the most successful requests in flight at
	// once (half-open [start, end) intervals).
	PeakConcurrentRequests int
	// Dists maps TTFT, TPOT, ITL and E2EL to their distributions.
	Dists map[string]Dist
	// OutputLens holds each request's output token count (0 for failures).
	OutputLens []int
}

// Options select what Compute reports.
type Options struct {
	// Percentiles to compute for every metric, e.g. 50, 90, 99.
	Percentiles []float64
	// Goodput maps "ttft", "tpot" and "e2el" to SLOs in milliseconds; empty
	// disables goodput.
	Goodput map[string]float64
}

// Compute aggregates records over a benchmark that lasted duration seconds.
func Compute(recs []Record, duration float64, o Options) Summary {
	s := Summary{Duration: duration, Dists: map[string]Dist{}, OutputLens: make([]int, len(recs))}
	var ttfts, tpots, allTPOTs, itls, e2els []float64
	for i, r := range recs {
		if !r.Success {
			s.Failed++
			continue
		}
		s.Completed++
		s.OutputLens[i] = r.OutputTokens
		s.TotalInput += r.PromptLen
		s.TotalOutput += r.OutputTokens
		tpot := 0.0
		if r.OutputTokens > 1 {
			tpot = (r.Latency - r.TTFT) / float64(r.OutputTokens-1)
			tpots = append(tpots, tpot)
		}
		allTPOTs = append(allTPOTs, tpot)
		itls = append(itls, r.ITL...)
		ttfts = append(ttfts, r.TTFT)
		e2els = append(e2els, r.Latency)
	}
	if duration > 0 {
		s.RequestThroughput = float64(s.Completed) / duration
		s.OutputThroughput = float64(s.TotalOutput) / duration
		s.TotalTokenThroughput = float64(s.TotalInput+s.TotalOutput) / duration
	}
	if len(o.Goodput) > 0 && duration > 0 {
		good := 0
		for i := range ttfts {
			ok := true
			if slo, set := o.Goodput[TTFT]; set && ttfts[i] > slo/1000 {
				ok = false
			}
			if slo, set := o.Goodput[TPOT]; set && allTPOTs[i] > slo/1000 {
				ok = false
			}
			if slo, set := o.Goodput[E2EL]; set && e2els[i] > slo/1000 {
				ok = false
			}
			if ok {
				good++
			}
		}
		s.RequestGoodput = float64(good) / duration
	}
	s.Dists[TTFT] = distribution(ttfts, o.Percentiles)
	s.Dists[TPOT] = distribution(tpots, o.Percentiles)
	s.Dists[ITL] = distribution(itls, o.Percentiles)
	s.Dists[E2EL] = distribution(e2els, o.Percentiles)
	s.PeakOutputTokensPerS, s.PeakConcurrentRequests = peaks(recs)
	return s
}

// distribution computes mean, median, population std and percentiles of
// values (seconds) in milliseconds; all zero for no values, as numpy gives
// for vLLM's `values or 0`.
func distribution(values []float64, ps []float64) Dist {
	sorted := slices.Clone(values)
	sort.Float64s(sorted)
	d := Dist{Percentiles: make([]Percentile, len(ps))}
	if len(sorted) > 0 {
		sum := 0.0
		for _, v := range sorted {
			sum += v
		}
		d.Mean = sum / float64(len(sorted))
		ss := 0.0
		for _, v := range sorted {
			ss += (v - d.Mean) * (v - d.Mean)
		}
		d.Std = math.Sqrt(ss/float64(len(sorted))) * 1000
		d.Mean *= 1000
		d.Median = Quantile(sorted, 50) * 1000
	}
	for i, p := range ps {
		d.Percentiles[i] = Percentile{P: p, Value: Quantile(sorted, p) * 1000}
	}
	return d
}

// Quantile returns the p-th percentile (0..100) of sorted values with
// numpy's default linear interpolation; 0 for no values.
func Quantile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	pos := p / 100 * float64(n-1)
	lo := int(math.Floor(pos))
	if lo < 0 {
		return sorted[0]
	}
	if lo >= n-1 {
		return sorted[n-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[lo+1]-sorted[lo])*frac
}

// peaks rebuilds each successful request's event times from its start,
// TTFT and ITLs, buckets them per second from the earliest start, and
// sweeps [start, start+latency) intervals for the peak concurrency.
func peaks(recs []Record) (float64, int) {
	minStart, maxEnd, found := math.Inf(1), math.Inf(-1), false
	for _, r := range recs {
		if r.Success {
			found = true
			minStart = min(minStart, r.Start)
			maxEnd = max(maxEnd, r.Start+r.Latency)
		}
	}
	if !found {
		return 0, 0
	}
	buckets := make([]float64, int(math.Ceil(maxEnd-minStart))+1)
	type event struct {
		t     float64
		delta int
	}
	events := make([]event, 0, 2*len(recs))
	for _, r := range recs {
		if !r.Success {
			continue
		}
		t := r.Start + r.TTFT
		add := func(t float64) {
			if b := int(t - minStart); b >= 0 && b < len(buckets) {
				buckets[b]++
			}
		}
		add(t)
		for _, gap := range r.ITL {
			t += gap
			add(t)
		}
		events = append(events, event{r.Start, 1}, event{r.Start + r.Latency, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].t != events[j].t {
			return events[i].t < events[j].t
		}
		return events[i].delta < events[j].delta
	})
	cur, peak := 0, 0
	for _, e := range events {
		cur += e.delta
		peak = max(peak, cur)
	}
	return slices.Max(buckets), peak
}

// ParsePercentiles parses vLLM's --metric-percentiles ("25,50,99").
func ParsePercentiles(s string) ([]float64, error) {
	var ps []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || p < 0 || p > 100 || math.IsNaN(p) {
			return nil, fmt.Errorf("parse percentile %q: want a number in [0, 100]", f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// ParseMetricNames parses --percentile-metrics ("ttft,tpot,itl,e2el").
func ParseMetricNames(s string) ([]string, error) {
	var names []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
			continue
		case TTFT, TPOT, ITL, E2EL:
			names = append(names, f)
		default:
			return nil, fmt.Errorf("parse percentile metric %q: want ttft, tpot, itl or e2el", f)
		}
	}
	return names, nil
}

// ParseGoodput parses SLOs given as "ttft:MS" pairs, separated by spaces or
// commas, as --goodput takes them.
func ParseGoodput(pairs []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, arg := range pairs {
		for pair := range strings.FieldsFuncSeq(arg, func(r rune) bool { return r == ',' || r == ' ' }) {
			name, val, ok := strings.Cut(pair, ":")
			v, err := strconv.ParseFloat(val, 64)
			if !ok || err != nil || math.IsNaN(v) {
				return nil, fmt.Errorf("parse goodput %q: want KEY:VALUE with VALUE in milliseconds", pair)
			}
			if name != TTFT && name != TPOT && name != E2EL {
				return nil, fmt.Errorf("parse goodput %q: metric must be ttft, tpot or e2el", pair)
			}
			if v < 0 {
				return nil, fmt.Errorf("parse goodput %q: value must be non-negative", pair)
			}
			out[name] = v
		}
	}
	return out, nil
}

// PercentileLabel formats p as vLLM does in keys and labels: "99", "99.9".
func PercentileLabel(p float64) string {
	if p == math.Trunc(p) {
		return strconv.Itoa(int(p))
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}
