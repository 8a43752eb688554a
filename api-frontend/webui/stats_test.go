package webui

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-llm/sluice/ipc"
)

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Upper: []float64{1, 2, 4}, Cumulative: []uint64{2, 6, 8}, Count: 10}
	tests := []struct {
		q, want float64
	}{
		{0, 0},     // rank 0 falls in the first non-empty bucket, at its lower edge
		{0.1, 0.5}, // rank 1 of 2 in (0, 1]
		{0.2, 1},   // rank 2: top of the first bucket
		{0.4, 1.5}, // rank 4: half way through (1, 2] (2 of 4)
		{0.7, 3},   // rank 7: half way through (2, 4]
		{0.8, 4},   // rank 8: top of the last bucket
		{0.95, 4},  // beyond the last bound: the last bound
		{1.5, 4},   // clamped to 1
		{-1, 0},    // clamped to 0
	}
	for _, tc := range tests {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, empty := range []Histogram{{}, {Upper: []float64{1}, Cumulative: []uint64{0}}, {Upper: []float64{1, 2}, Cumulative: []uint64{1}, Count: 1}} {
		if got := empty.Quantile(0.5); !math.IsNaN(got) {
			t.Errorf("%+v.Quantile(0.5) = %v, want NaN", empty, got)
		}
	}
}

// FuzzHistogramQuantile checks the estimate stays inside the buckets' range
// and grows with q, whatever the (well-formed) histogram.
func FuzzHistogramQuantile(f *testing.F) {
	f.Add([]byte{2, 4, 2}, uint8(3), 0.5)
	f.Add([]byte{0, 0, 9}, uint8(0), 0.99)
	f.Fuzz(func(t *testing.T, counts []byte, beyond uint8, q float64) {
		if len(counts) == 0 || len(counts) > 32 || math.IsNaN(q) {
			return
		}
		var h Histogram
		var cum uint64
		for i, c := range counts {
			cum += uint64(c)
			h.Upper = append(h.Upper, float64(i+1)*0.5)
			h.Cumulative = append(h.Cumulative, cum)
		}
		h.Count = cum + uint64(beyond)
		v := h.Quantile(q)
		if h.Count == 0 {
			if !math.IsNaN(v) {
				t.Fatalf("empty histogram gave %v", v)
			}
			return
		}
		last := h.Upper[len(h.Upper)-1]
		if math.IsNaN(v) || v < 0 || v > last {
			t.Fatalf("Quantile(%v) = %v outside [0, %v] for %+v", q, v, last, h)
		}
		if w := h.Quantile(math.Min(1, math.Abs(q)+0.1)); w < h.Quantile(math.Abs(q))-1e-9 {
			t.Fatalf("not monotonic: q=%v gives %v, larger q gives %v", q, h.Quantile(math.Abs(q)), w)
		}
	})
}

func TestFromGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	eng := []string{"engine"}
	running := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricRunning}, eng)
	waiting := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricWaiting}, eng)
	kv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricKVUsage}, eng)
	pq := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricPrefixQueries}, eng)
	ph := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricPrefixHits}, eng)
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricEngineUp}, eng)
	ttft := prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricTTFT, Buckets: []float64{0.1, 1}})
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricSuccess}, []string{"finished_reason"})
	streams := prometheus.NewGauge(prometheus.GaugeOpts{Name: metricStreamsOpen})
	chunks := prometheus.NewCounter(prometheus.CounterOpts{Name: metricChunks})
	gen := prometheus.NewCounter(prometheus.CounterOpts{Name: metricGenTokens})
	reg.MustRegister(running, waiting, kv, pq, ph, up, ttft, success, streams, chunks, gen)
	running.WithLabelValues("1").Set(3)
	waiting.WithLabelValues("1").Set(2)
	kv.WithLabelValues("1").Set(0.25)
	pq.WithLabelValues("1").Add(100)
	ph.WithLabelValues("1").Add(40)
	up.WithLabelValues("1").Set(1)
	running.WithLabelValues("0").Set(1)
	up.WithLabelValues("0").Set(0)
	ttft.Observe(0.05)
	ttft.Observe(0.5)
	ttft.Observe(5)
	success.WithLabelValues("stop").Add(4)
	success.WithLabelValues("abort").Add(1)
	streams.Set(7)
	chunks.Add(99)
	gen.Add(1234)

	st, err := FromGatherer(reg, "demo", "fe-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Model != "demo" || st.Frontend.ID != "fe-1" || st.Frontend.PID <= 0 {
		t.Errorf("identity: %+v", st)
	}
	f := st.Frontend
	if f.StreamsOpen != 7 || f.ChunksWritten != 99 || f.GeneratedTokens != 1234 || f.RequestsFinished != 5 {
		t.Errorf("frontend counters: %+v", f)
	}
	wantTTFT := Histogram{Upper: []float64{0.1, 1}, Cumulative: []uint64{1, 2}, Count: 3, Sum: 5.55}
	if f.TTFT.Count != wantTTFT.Count || math.Abs(f.TTFT.Sum-wantTTFT.Sum) > 1e-9 ||
		len(f.TTFT.Upper) != 2 || f.TTFT.Upper[1] != 1 || f.TTFT.Cumulative[0] != 1 || f.TTFT.Cumulative[1] != 2 {
		t.Errorf("TTFT = %+v, want %+v", f.TTFT, wantTTFT)
	}
	want := []EngineStats{
		{ID: "0", Up: false, Running: 1},
		{ID: "1", Up: true, Running: 3, Waiting: 2, KVUsage: 0.25, PrefixQueries: 100, PrefixHits: 40},
	}
	if len(st.Engines) != len(want) {
		t.Fatalf("engines = %+v, want %+v", st.Engines, want)
	}
	for i := range want {
		if st.Engines[i] != want[i] {
			t.Errorf("engine %d = %+v, want %+v", i, st.Engines[i], want[i])
		}
	}
	// The document is valid JSON with the field names the dashboard reads.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	fe := doc["frontend"].(map[string]any)
	for _, k := range []string{"id", "pid", "streams_open", "chunks_written", "generated_tokens", "ttft_seconds", "itl_seconds"} {
		if _, ok := fe[k]; !ok {
			t.Errorf("frontend JSON lacks %q: %s", k, b)
		}
	}
	e0 := doc["engines"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "up", "running", "waiting", "kv_usage", "prefix_queries", "prefix_hits", "generated_tokens"} {
		if _, ok := e0[k]; !ok {
			t.Errorf("engine JSON lacks %q: %s", k, b)
		}
	}
}

func TestEngineFromScheduler(t *testing.T) {
	s := ipc.SchedulerStats{Running: 2, Waiting: 5, KVUsage: 0.5, PrefixQueries: 10, PrefixHits: 4, Preemptions: -1,
		GeneratedTokens: 77, PromptTokens: 30, StepTimeMicros: 1500}
	got := EngineFromScheduler("0", true, s)
	want := EngineStats{ID: "0", Up: true, Running: 2, Waiting: 5, KVUsage: 0.5, PrefixQueries: 10, PrefixHits: 4,
		GeneratedTokens: 77, PromptTokens: 30, StepTimeMicros: 1500}
	if got != want {
		t.Errorf("EngineFromScheduler = %+v, want %+v", got, want)
	}
}
