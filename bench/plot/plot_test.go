package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"testing"
)

// svgSummary parses an SVG and returns the series names and point counts.
func svgSummary(t *testing.T, data []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	series := map[string]int{}
	current := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		for _, a := range el.Attr {
			if el.Name.Local == "g" && a.Name.Local == "data-name" {
				current = a.Value
				series[current] = 0
			}
		}
		if el.Name.Local == "circle" && current != "" {
			series[current]++
		}
	}
	return series
}

func TestWriteSVG(t *testing.T) {
	c := Chart{
		Title: "Latency <ms> & more", XLabel: "concurrency", YLabel: "ms",
		Series: []Series{
			{Name: "p50", X: []float64{1, 10, 100}, Y: []float64{1.5, 2.5, 9}},
			{Name: "p99", X: []float64{1, 10, 100}, Y: []float64{3, math.NaN(), 40}},
		},
	}
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	got := svgSummary(t, b.Bytes())
	if got["p50"] != 3 || got["p99"] != 2 || len(got) != 2 {
		t.Errorf("series points %v, want p50:3 p99:2 (NaN left out)", got)
	}
	if !bytes.Contains(b.Bytes(), []byte("Latency &lt;ms&gt; &amp; more")) {
		t.Error("title not escaped")
	}
}

func TestWriteSVGErrors(t *testing.T) {
	var b bytes.Buffer
	if err := (Chart{}).WriteSVG(&b); err == nil {
		t.Error("chart without series accepted")
	}
	if err := (Chart{Series: []Series{{Name: "a", X: []float64{1}, Y: nil}}}).WriteSVG(&b); err == nil {
		t.Error("mismatched series accepted")
	}
	// Degenerate data still draws.
	b.Reset()
	if err := (Chart{Series: []Series{{Name: "flat", X: []float64{5}, Y: []float64{0}}}}).WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if got := svgSummary(t, b.Bytes()); got["flat"] != 1 {
		t.Errorf("degenerate chart series %v", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 100, 5, []float64{0, 20, 40, 60, 80, 100}},
		{1, 100, 8, []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}},
		{0, 0.93, 6, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 1e-9, 6, []float64{0, 2e-10, 4e-10, 6e-10, 8e-10, 1e-9}},
	} {
		got := niceTicks(tc.lo, tc.hi, tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12*max(1, math.Abs(tc.want[i])) {
				t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
				break
			}
		}
		if got[0] > tc.lo || got[len(got)-1] < tc.hi || !slices.IsSorted(got) {
			t.Errorf("ticks %v do not cover [%v, %v]", got, tc.lo, tc.hi)
		}
	}
}
