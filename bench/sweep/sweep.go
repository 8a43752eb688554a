// Package sweep runs the serving benchmark at several concurrency caps and
// writes the results as a table, JSON, CSV and SVG charts (throughput and
// TTFT/TPOT/ITL/E2EL percentiles against concurrency).
package sweep

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-llm/sluice/bench/metrics"
	"github.com/sluice-llm/sluice/bench/plot"
	"github.com/sluice-llm/sluice/bench/serve"
)

// Options configure a sweep.
type Options struct {
	// Serve is the per-point configuration; MaxConcurrency, NumPrompts and
	// ResultJSON are set for each point.
	Serve serve.Options
	// Concurrencies are the --max-concurrency values to run.
	Concurrencies []int
	// PromptsPerConcurrency sets a point's prompt count to this times its
	// concurrency, but at least MinPrompts.
	PromptsPerConcurrency int
	MinPrompts            int
	// OutputDir receives sweep.json, sweep.csv, conc-N.json and the SVGs.
	OutputDir string
}

// Latency is one metric's summary at a sweep point, in milliseconds.
type Latency struct {
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
}

// Point is the result at one concurrency.
type Point struct {
	MaxConcurrency       int     `json:"max_concurrency"`
	NumPrompts           int     `json:"num_prompts"`
	Completed            int     `json:"completed"`
	Failed               int     `json:"failed"`
	Duration             float64 `json:"duration_s"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	TTFT                 Latency `json:"ttft"`
	TPOT                 Latency `json:"tpot"`
	ITL                  Latency `json:"itl"`
	E2EL                 Latency `json:"e2el"`
	ClientCores          float64 `json:"client_cpu_cores"`
}

// ParseConcurrencies parses "1,10,20".
func ParseConcurrencies(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("parse --concurrencies %q: want positive integers", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("parse --concurrencies: no values")
	}
	return out, nil
}

// Run runs every point, printing each serve result, then the summary table,
// and writes the files to o.OutputDir.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) ([]Point, error) {
	if len(o.Concurrencies) == 0 {
		return nil, errors.New("sweep: no concurrencies")
	}
	if o.OutputDir == "" {
		return nil, errors.New("sweep: --output-dir is required")
	}
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: create output dir: %w", err)
	}
	base := o.Serve
	base.Percentiles = slices.Clone(base.Percentiles)
	for _, p := range []float64{50, 90, 99} {
		if !slices.Contains(base.Percentiles, p) {
			base.Percentiles = append(base.Percentiles, p)
		}
	}
	slices.Sort(base.Percentiles)
	base.PercentileMetrics = slices.Clone(base.PercentileMetrics)
	for _, m := range []string{metrics.TTFT, metrics.TPOT, metrics.ITL, metrics.E2EL} {
		if !slices.Contains(base.PercentileMetrics, m) {
			base.PercentileMetrics = append(base.PercentileMetrics, m)
		}
	}
	var points []Point
	for i, c := range o.Concurrencies {
		so := base
		so.MaxConcurrency = c
		so.NumPrompts = max(c*o.PromptsPerConcurrency, o.MinPrompts, 1)
		so.ResultJSON = filepath.Join(o.OutputDir, fmt.Sprintf("conc-%d.json", c))
		if i > 0 {
			so.ReadyTimeoutSec = 0 // the server answered the first point
		}
		fmt.Fprintf(stdout, "\n### sweep point %d/%d: max concurrency %d, %d prompts\n", i+1, len(o.Concurrencies), c, so.NumPrompts)
		res, err := serve.Run(ctx, so, stdout, stderr)
		if err != nil {
			return points, fmt.Errorf("sweep point %d: %w", c, err)
		}
		points = append(points, pointOf(c, res))
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintln(stdout)
	WriteTable(stdout, points)
	if err := WriteFiles(o.OutputDir, points); err != nil {
		return points, err
	}
	fmt.Fprintf(stdout, "wrote sweep.json, sweep.csv and SVG charts to %s\n", o.OutputDir)
	return points, ctx.Err()
}

// pointOf extracts a sweep point from a run.
func pointOf(c int, r *serve.Result) Point {
	s := r.Summary
	lat := func(name string) Latency {
		d := s.Dists[name]
		p50, _ := d.At(50)
		p90, _ := d.At(90)
		p99, _ := d.At(99)
		return Latency{Mean: d.Mean, P50: p50, P90: p90, P99: p99}
	}
	return Point{
		MaxConcurrency:       c,
		NumPrompts:           len(r.Records),
		Completed:            s.Completed,
		Failed:               s.Failed,
		Duration:             s.Duration,
		RequestThroughput:    s.RequestThroughput,
		OutputThroughput:     s.OutputThroughput,
		TotalTokenThroughput: s.TotalTokenThroughput,
		TTFT:                 lat(metrics.TTFT),
		TPOT:                 lat(metrics.TPOT),
		ITL:                  lat(metrics.ITL),
		E2EL:                 lat(metrics.E2EL),
		ClientCores:          r.ClientCores,
	}
}

// WriteTable prints the summary table.
func WriteTable(w io.Writer, points []Point) {
	fmt.Fprintf(w, "%8s | %8s | %10s | %17s | %15s | %15s | %9s\n",
		"max_conc", "req/s", "out tok/s", "TTFT p50/p99 ms", "TPOT p50/p99", "ITL p50/p99", "E2E p50")
	fmt.Fprintln(w, strings.Repeat("-", 8)+"-+-"+strings.Repeat("-", 8)+"-+-"+strings.Repeat("-", 10)+"-+-"+
		strings.Repeat("-", 17)+"-+-"+strings.Repeat("-", 15)+"-+-"+strings.Repeat("-", 15)+"-+-"+strings.Repeat("-", 9))
	pair := func(l Latency) string { return fmt.Sprintf("%.1f/%.1f", l.P50, l.P99) }
	for _, p := range points {
		fmt.Fprintf(w, "%8d | %8.2f | %10.1f | %17s | %15s | %15s | %9.1f\n",
			p.MaxConcurrency, p.RequestThroughput, p.OutputThroughput, pair(p.TTFT), pair(p.TPOT), pair(p.ITL), p.E2EL.P50)
	}
}

// csvHeader names the CSV columns.
var csvHeader = []string{
	"max_concurrency", "num_prompts", "completed", "failed", "duration_s",
	"request_throughput", "output_throughput", "total_token_throughput",
	"ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms",
	"tpot_mean_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms",
	"itl_mean_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
	"e2el_mean_ms", "e2el_p50_ms", "e2el_p90_ms", "e2el_p99_ms",
	"client_cpu_cores",
}

// WriteCSV writes one row per point.
func WriteCSV(w io.Writer, points []Point) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, p := range points {
		row := []string{
			strconv.Itoa(p.MaxConcurrency), strconv.Itoa(p.NumPrompts), strconv.Itoa(p.Completed), strconv.Itoa(p.Failed), f(p.Duration),
			f(p.RequestThroughput), f(p.OutputThroughput), f(p.TotalTokenThroughput),
		}
		for _, l := range []Latency{p.TTFT, p.TPOT, p.ITL, p.E2EL} {
			row = append(row, f(l.Mean), f(l.P50), f(l.P90), f(l.P99))
		}
		row = append(row, f(p.ClientCores))
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("write CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}

// Charts returns the sweep's charts keyed by file name.
func Charts(points []Point) map[string]plot.Chart {
	xs := make([]float64, len(points))
	for i, p := range points {
		xs[i] = float64(p.MaxConcurrency)
	}
	col := func(get func(Point) float64) []float64 {
		ys := make([]float64, len(points))
		for i, p := range points {
			ys[i] = get(p)
		}
		return ys
	}
	charts := map[string]plot.Chart{
		"throughput.svg": {
			Title: "Token throughput vs concurrency", XLabel: "max concurrency", YLabel: "tokens/s",
			Series: []plot.Series{
				{Name: "output tok/s", X: xs, Y: col(func(p Point) float64 { return p.OutputThroughput })},
				{Name: "total tok/s", X: xs, Y: col(func(p Point) float64 { return p.TotalTokenThroughput })},
			},
		},
		"requests.svg": {
			Title: "Request throughput vs concurrency", XLabel: "max concurrency", YLabel: "requests/s",
			Series: []plot.Series{{Name: "req/s", X: xs, Y: col(func(p Point) float64 { return p.RequestThroughput })}},
		},
	}
	for _, m := range []struct {
		file, title string
		get         func(Point) Latency
	}{
		{"ttft.svg", "Time to first token", func(p Point) Latency { return p.TTFT }},
		{"tpot.svg", "Time per output token (excl. 1st)", func(p Point) Latency { return p.TPOT }},
		{"itl.svg", "Inter-token latency", func(p Point) Latency { return p.ITL }},
		{"e2el.svg", "End-to-end latency", func(p Point) Latency { return p.E2EL }},
	} {
		charts[m.file] = plot.Chart{
			Title: m.title + " vs concurrency", XLabel: "max concurrency", YLabel: "milliseconds",
			Series: []plot.Series{
				{Name: "p50", X: xs, Y: col(func(p Point) float64 { return m.get(p).P50 })},
				{Name: "p90", X: xs, Y: col(func(p Point) float64 { return m.get(p).P90 })},
				{Name: "p99", X: xs, Y: col(func(p Point) float64 { return m.get(p).P99 })},
				{Name: "mean", X: xs, Y: col(func(p Point) float64 { return m.get(p).Mean })},
			},
		}
	}
	return charts
}

// WriteFiles writes sweep.json, sweep.csv and the charts into dir.
func WriteFiles(dir string, points []Point) error {
	b, err := json.MarshalIndent(map[string]any{"points": points}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sweep JSON: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write sweep JSON: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		return fmt.Errorf("create sweep CSV: %w", err)
	}
	if err := errors.Join(WriteCSV(f, points), f.Close()); err != nil {
		return err
	}
	for name, chart := range Charts(points) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if err := errors.Join(chart.WriteSVG(f), f.Close()); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
