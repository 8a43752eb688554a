package serve

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/sluice-llm/sluice/bench/metrics"
)

// ErrorCount is one distinct failure message and how many requests hit it.
type ErrorCount struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// summarizeErrors groups failed requests by message, most frequent first.
func summarizeErrors(recs []metrics.Record) []ErrorCount {
	counts := map[string]int{}
	for _, r := range recs {
		if !r.Success {
			counts[r.Error]++
		}
	}
	out := make([]ErrorCount, 0, len(counts))
	for e, n := range counts {
		out = append(out, ErrorCount{Error: e, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Error < out[j].Error
	})
	return out
}

// printErrors prints the distinct failure messages (at most 10) with their
// counts, before the result block as vLLM prints its failed-request list.
func printErrors(w io.Writer, recs []metrics.Record) {
	errs := summarizeErrors(recs)
	if len(errs) == 0 {
		return
	}
	fmt.Fprintf(w, "Failed requests during benchmark run detected (%d distinct errors, capping to 10):\n", len(errs))
	for i, e := range errs {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "Error %d (%d requests): %s\n", i, e.Count, e.Error)
	}
}

// center centres s in a width-50 line of c, as Python's
// "{s:{c}^{n}}".format does (the odd pad goes right).
func center(s string, c byte) string {
	pad := max(50-len(s), 0)
	left := pad / 2
	return strings.Repeat(string(c), left) + s + strings.Repeat(string(c), pad-left)
}

// printResult prints vLLM's "Serving Benchmark Result" block, plus the
// client CPU line.
func printResult(w io.Writer, r *Result) {
	s, o := r.Summary, r.Options
	line := func(label string, v any) {
		switch v := v.(type) {
		case float64:
			fmt.Fprintf(w, "%-40s %-10.2f\n", label, v)
		default:
			fmt.Fprintf(w, "%-40s %-10v\n", label, v)
		}
	}
	fmt.Fprintln(w, center(" Serving Benchmark Result ", '='))
	line("Successful requests:", s.Completed)
	line("Failed requests:", s.Failed)
	if o.MaxConcurrency > 0 {
		line("Maximum request concurrency:", o.MaxConcurrency)
	}
	if !math.IsInf(o.RequestRate, 1) {
		line("Request rate configured (RPS):", o.RequestRate)
	}
	line("Benchmark duration (s):", s.Duration)
	line("Total input tokens:", s.TotalInput)
	line("Total generated tokens:", s.TotalOutput)
	line("Request throughput (req/s):", s.RequestThroughput)
	if len(o.Goodput) > 0 {
		line("Request goodput (req/s):", s.RequestGoodput)
	}
	line("Output token throughput (tok/s):", s.OutputThroughput)
	line("Peak output token throughput (tok/s):", s.PeakOutputTokensPerS)
	line("Peak concurrent requests:", float64(s.PeakConcurrentRequests))
	line("Total token throughput (tok/s):", s.TotalTokenThroughput)
	line("Client CPU (cores used):", r.ClientCores)
	sections := []struct{ key, name, header string }{
		{metrics.TTFT, "TTFT", "Time to First Token"},
		{metrics.TPOT, "TPOT", "Time per Output Token (excl. 1st token)"},
		{metrics.ITL, "ITL", "Inter-token Latency"},
		{metrics.E2EL, "E2EL", "End-to-end Latency"},
	}
	for _, sec := range sections {
		selected := false
		for _, m := range o.PercentileMetrics {
			selected = selected || m == sec.key
		}
		if !selected {
			continue
		}
		d := s.Dists[sec.key]
		fmt.Fprintln(w, center(sec.header, '-'))
		line("Mean "+sec.name+" (ms):", d.Mean)
		line("Median "+sec.name+" (ms):", d.Median)
		for _, p := range d.Percentiles {
			line("P"+metrics.PercentileLabel(p.P)+" "+sec.name+" (ms):", p.Value)
		}
	}
	fmt.Fprintln(w, strings.Repeat("=", 50))
}
