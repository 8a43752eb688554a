package webui

import (
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-llm/sluice/ipc"
)

// Stats is the document /ui/api/stats serves and the dashboard charts. The
// server fills it from its metrics (FromGatherer) and its engines' latest
// scheduler stats (EngineFromScheduler).
//
// Counters are cumulative since the process (or engine) started; the
// dashboard turns them into rates and windowed percentiles by differencing
// successive documents that carry the same frontend or engine ID, so several
// frontends behind one port (each poll may reach a different one) still chart
// as separate series.
type Stats struct {
	// Model is the served model name.
	Model string `json:"model,omitempty"`
	// Frontend is the process that answered.
	Frontend FrontendStats `json:"frontend"`
	// Engines are the engine-core processes this frontend talks to.
	Engines []EngineStats `json:"engines"`
}

// FrontendStats are one api-frontend process's figures.
type FrontendStats struct {
	ID  string `json:"id"`
	PID int    `json:"pid"`
	// StreamsOpen is the number of SSE streams open now.
	StreamsOpen int64 `json:"streams_open"`
	// RequestsFinished counts finished requests, any finish reason.
	RequestsFinished uint64 `json:"requests_finished"`
	// ChunksWritten, BytesWritten and CoalescedTokens describe the SSE output.
	ChunksWritten   uint64 `json:"chunks_written"`
	BytesWritten    uint64 `json:"bytes_written"`
	CoalescedTokens uint64 `json:"coalesced_tokens"`
	// PromptTokens and GeneratedTokens count tokens of finished requests.
	PromptTokens    uint64 `json:"prompt_tokens"`
	GeneratedTokens uint64 `json:"generated_tokens"`
	// TTFT, ITL and E2E are the latency histograms, in seconds.
	TTFT Histogram `json:"ttft_seconds"`
	ITL  Histogram `json:"itl_seconds"`
	E2E  Histogram `json:"e2e_seconds"`
}

// EngineStats are one engine's figures as the frontend last heard them.
type EngineStats struct {
	ID string `json:"id"`
	// Up is whether the frontend's connection to the engine is ready.
	Up      bool  `json:"up"`
	Running int64 `json:"running"`
	Waiting int64 `json:"waiting"`
	// KVUsage is the fraction of KV blocks in use, 0..1.
	KVUsage float64 `json:"kv_usage"`
	// PrefixQueries and PrefixHits are cumulative prompt tokens looked up in
	// and found in the prefix cache; the hit rate is their windowed ratio.
	PrefixQueries uint64 `json:"prefix_queries"`
	PrefixHits    uint64 `json:"prefix_hits"`
	Preemptions   uint64 `json:"preemptions"`
	// GeneratedTokens and PromptTokens are cumulative tokens the engine
	// computed (0 when unknown: the dashboard then charts the frontend's).
	GeneratedTokens uint64 `json:"generated_tokens"`
	PromptTokens    uint64 `json:"prompt_tokens"`
	// StepTimeMicros is the duration of the engine's last step.
	StepTimeMicros int64 `json:"step_time_us"`
}

// Histogram is a cumulative histogram in Prometheus's form.
type Histogram struct {
	// Upper are the buckets' upper bounds, ascending, +Inf left out.
	Upper []float64 `json:"upper"`
	// Cumulative[i] counts observations <= Upper[i].
	Cumulative []uint64 `json:"cumulative"`
	// Count and Sum are over all observations (the +Inf bucket included).
	Count uint64  `json:"count"`
	Sum   float64 `json:"sum"`
}

// Quantile estimates the q-quantile (0..1) by linear interpolation inside
// its bucket, as Prometheus's histogram_quantile does; an observation beyond
// the last bound reports that bound. It returns NaN for an empty histogram.
// The dashboard's script implements the same rule over windowed deltas.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Upper) == 0 || len(h.Cumulative) != len(h.Upper) || math.IsNaN(q) {
		return math.NaN()
	}
	q = min(max(q, 0), 1)
	rank := q * float64(h.Count)
	lower, below := 0.0, uint64(0)
	for i, up := range h.Upper {
		c := h.Cumulative[i]
		if float64(c) >= rank && c > below {
			return lower + (up-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = up, c
	}
	return h.Upper[len(h.Upper)-1]
}

// HistogramFrom converts a Prometheus histogram.
func HistogramFrom(m *dto.Histogram) Histogram {
	var h Histogram
	if m == nil {
		return h
	}
	h.Count = m.GetSampleCount()
	h.Sum = m.GetSampleSum()
	for _, b := range m.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		h.Upper = append(h.Upper, b.GetUpperBound())
		h.Cumulative = append(h.Cumulative, b.GetCumulativeCount())
	}
	return h
}

// EngineFromScheduler makes an engine's entry from its latest scheduler stats.
func EngineFromScheduler(id string, up bool, s ipc.SchedulerStats) EngineStats {
	return EngineStats{
		ID:              id,
		Up:              up,
		Running:         int64(s.Running),
		Waiting:         int64(s.Waiting),
		KVUsage:         float64(s.KVUsage),
		PrefixQueries:   uint64(max(s.PrefixQueries, 0)),
		PrefixHits:      uint64(max(s.PrefixHits, 0)),
		Preemptions:     uint64(max(s.Preemptions, 0)),
		GeneratedTokens: uint64(max(s.GeneratedTokens, 0)),
		PromptTokens:    uint64(max(s.PromptTokens, 0)),
		StepTimeMicros:  s.StepTimeMicros,
	}
}

// Metric names FromGatherer reads (the frontend's registry: see
// api-frontend/server/metrics.go).
const (
	metricRunning       = "vllm:num_requests_running"
	metricWaiting       = "vllm:num_requests_waiting"
	metricKVUsage       = "vllm:kv_cache_usage_perc"
	metricPrefixQueries = "vllm:prefix_cache_queries_total"
	metricPrefixHits    = "vllm:prefix_cache_hits_total"
	metricPreemptions   = "vllm:num_preemptions_total"
	metricEngineUp      = "sluice_frontend_engine_up"
	metricTTFT          = "vllm:time_to_first_token_seconds"
	metricITL           = "vllm:inter_token_latency_seconds"
	metricE2E           = "vllm:e2e_request_latency_seconds"
	metricPromptTokens  = "vllm:prompt_tokens_total"
	metricGenTokens     = "vllm:generation_tokens_total"
	metricSuccess       = "vllm:request_success_total"
	metricStreamsOpen   = "sluice_frontend_streams_open"
	metricChunks        = "sluice_frontend_sse_chunks_total"
	metricBytes         = "sluice_frontend_sse_bytes_total"
	metricCoalesced     = "sluice_frontend_coalesced_tokens_total"
	engineLabel         = "engine"
)

// FromGatherer builds the stats of the frontend frontendID (this process)
// from its Prometheus registry. Engines are those the per-engine gauges
// name (label "engine"), sorted by ID; their GeneratedTokens and
// PromptTokens stay 0 (the registry has no per-engine token counters), so a
// server that keeps its engines' latest ipc.SchedulerStats should fill those
// with EngineFromScheduler instead.
func FromGatherer(g prometheus.Gatherer, model, frontendID string) (Stats, error) {
	mfs, err := g.Gather()
	if err != nil {
		return Stats{}, fmt.Errorf("gather metrics: %w", err)
	}
	st := Stats{Model: model, Frontend: FrontendStats{ID: frontendID, PID: os.Getpid()}}
	engines := map[string]*EngineStats{}
	engine := func(m *dto.Metric) *EngineStats {
		id := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == engineLabel {
				id = l.GetValue()
			}
		}
		e := engines[id]
		if e == nil {
			e = &EngineStats{ID: id}
			engines[id] = e
		}
		return e
	}
	fe := &st.Frontend
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case metricRunning:
				engine(m).Running = int64(value(m))
			case metricWaiting:
				engine(m).Waiting = int64(value(m))
			case metricKVUsage:
				engine(m).KVUsage = value(m)
			case metricPrefixQueries:
				engine(m).PrefixQueries = uint64(value(m))
			case metricPrefixHits:
				engine(m).PrefixHits = uint64(value(m))
			case metricPreemptions:
				engine(m).Preemptions = uint64(value(m))
			case metricEngineUp:
				engine(m).Up = value(m) > 0
			case metricTTFT:
				fe.TTFT = HistogramFrom(m.GetHistogram())
			case metricITL:
				fe.ITL = HistogramFrom(m.GetHistogram())
			case metricE2E:
				fe.E2E = HistogramFrom(m.GetHistogram())
			case metricPromptTokens:
				fe.PromptTokens = uint64(value(m))
			case metricGenTokens:
				fe.GeneratedTokens = uint64(value(m))
			case metricSuccess:
				fe.RequestsFinished += uint64(value(m))
			case metricStreamsOpen:
				fe.StreamsOpen = int64(value(m))
			case metricChunks:
				fe.ChunksWritten = uint64(value(m))
			case metricBytes:
				fe.BytesWritten = uint64(value(m))
			case metricCoalesced:
				fe.CoalescedTokens = uint64(value(m))
			}
		}
	}
	st.Engines = make([]EngineStats, 0, len(engines))
	for _, e := range engines {
		st.Engines = append(st.Engines, *e)
	}
	sort.Slice(st.Engines, func(i, j int) bool { return st.Engines[i].ID < st.Engines[j].ID })
	return st, nil
}

// value is a gauge's, counter's or untyped metric's value, never NaN or ±Inf
// (JSON has no spelling for them).
func value(m *dto.Metric) float64 {
	var v float64
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
