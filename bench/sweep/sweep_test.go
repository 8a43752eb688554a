package sweep

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/bench/serve"
	"github.com/sluice-llm/sluice/bench/stub"
	"go.uber.org/goleak"
)

func TestSweep(t *testing.T) {
	srv := httptest.NewServer(stub.New(stub.Options{FirstDelay: 5 * time.Millisecond, Interval: 2 * time.Millisecond}))
	defer srv.Close()
	so := serve.DefaultOptions()
	so.BaseURL = srv.URL
	so.Model = "stub-model"
	so.RandomInputLen, so.RandomOutputLen = 8, 5
	so.DisableProgress = true
	so.ReadyTimeoutSec = 0
	dir := t.TempDir()
	o := Options{Serve: so, Concurrencies: []int{1, 2, 4}, PromptsPerConcurrency: 2, MinPrompts: 3, OutputDir: dir}
	var out bytes.Buffer
	points, err := Run(context.Background(), o, &out, io.Discard)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if len(points) != 3 {
		t.Fatalf("%d points, want 3", len(points))
	}
	wantPrompts := []int{3, 4, 8}
	for i, p := range points {
		if p.NumPrompts != wantPrompts[i] || p.Completed != wantPrompts[i] || p.Failed != 0 {
			t.Errorf("point %d: %+v, want %d prompts all completed", i, p, wantPrompts[i])
		}
		if p.TTFT.P50 < 5 || p.ITL.P50 <= 0 || p.OutputThroughput <= 0 || p.TTFT.P99 < p.TTFT.P50 {
			t.Errorf("point %d metrics %+v", i, p)
		}
	}

	// Table.
	text := out.String()
	if !strings.Contains(text, "max_conc |    req/s |  out tok/s |") || !strings.Contains(text, "TTFT p50/p99 ms") {
		t.Errorf("no table header in output:\n%s", text)
	}
	for _, c := range []string{"\n       1 | ", "\n       2 | ", "\n       4 | "} {
		if !strings.Contains(text, c) {
			t.Errorf("table lacks row %q", c)
		}
	}

	// JSON.
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Points []Point `json:"points"`
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	if len(js.Points) != 3 || js.Points[2].MaxConcurrency != 4 || js.Points[2].E2EL.P50 != points[2].E2EL.P50 {
		t.Errorf("sweep.json points %+v", js.Points)
	}

	// CSV.
	f, err := os.Open(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("sweep.csv: %v", err)
	}
	if len(rows) != 4 || rows[0][0] != "max_concurrency" || len(rows[0]) != len(csvHeader) {
		t.Fatalf("sweep.csv rows %v", rows)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for i, row := range rows[1:] {
		c, _ := strconv.Atoi(row[col["max_concurrency"]])
		ttft, err := strconv.ParseFloat(row[col["ttft_p50_ms"]], 64)
		if c != o.Concurrencies[i] || err != nil || ttft < 5 {
			t.Errorf("CSV row %d: %v", i, row)
		}
	}

	// Per-point results and SVGs.
	for _, c := range []int{1, 2, 4} {
		if _, err := os.Stat(filepath.Join(dir, "conc-"+strconv.Itoa(c)+".json")); err != nil {
			t.Errorf("per-point result: %v", err)
		}
	}
	wantSeries := map[string][]string{
		"throughput.svg": {"output tok/s", "total tok/s"},
		"requests.svg":   {"req/s"},
		"ttft.svg":       {"p50", "p90", "p99", "mean"},
		"tpot.svg":       {"p50", "p90", "p99", "mean"},
		"itl.svg":        {"p50", "p90", "p99", "mean"},
		"e2el.svg":       {"p50", "p90", "p99", "mean"},
	}
	for file, names := range wantSeries {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		got := seriesPoints(t, b)
		for _, n := range names {
			if got[n] != 3 {
				t.Errorf("%s: series %q has %d points, want 3 (all: %v)", file, n, got[n], got)
			}
		}
		if len(got) != len(names) {
			t.Errorf("%s: series %v, want %v", file, got, names)
		}
	}
}

// seriesPoints parses an SVG (failing on malformed XML) and counts the
// markers of each series group.
func seriesPoints(t *testing.T, b []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	got, cur := map[string]int{}, ""
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = el.Name.Local
			}
			for _, a := range el.Attr {
				if a.Name.Local == "data-name" {
					cur = a.Value
					got[cur] = 0
				}
			}
			if el.Name.Local == "circle" && cur != "" {
				got[cur]++
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return got
}

func TestParseConcurrencies(t *testing.T) {
	got, err := ParseConcurrencies("1, 10,20")
	if err != nil || len(got) != 3 || got[1] != 10 {
		t.Errorf("ParseConcurrencies = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "a", "1,-2"} {
		if _, err := ParseConcurrencies(bad); err == nil {
			t.Errorf("ParseConcurrencies(%q) accepted", bad)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
