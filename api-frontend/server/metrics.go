package server

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-llm/sluice/ipc"
)

// Metrics are the frontend's Prometheus metrics, in their own registry.
// vllm:* names follow vLLM (docs/design/vllm-notes.md §6); sluice_* are the
// frontend's own.
type Metrics struct {
	Registry *prometheus.Registry
	model    string

	running, waiting, kvUsage *prometheus.GaugeVec
	ttft, itl, e2e, queue     prometheus.Observer
	promptTokens, genTokens   prometheus.Counter
	success                   *prometheus.CounterVec
	prefixQueries, prefixHits *prometheus.CounterVec
	preemptions               *prometheus.CounterVec

	StreamsOpen prometheus.Gauge
	Chunks      prometheus.Counter
	Bytes       prometheus.Counter
	// SendCPU and BatchSends: the output goroutines' CPU in the batched
	// sends of streamed chunks (sse.Batch.SendCPU) and how many sends
	// that was, so that /metrics shows the kernel's share of a token.
	SendCPU, BatchSends prometheus.Counter
	CoalescedTokens     prometheus.Counter
	Rejected            *prometheus.CounterVec
	// APIRequests counts generation requests by API surface.
	APIRequests *prometheus.CounterVec
	engineUp    *prometheus.GaugeVec

	// successBy and apiBy are success's and APIRequests' series of the
	// known label values, looked up once (read-only after NewMetrics).
	successBy map[string]prometheus.Counter
	apiBy     map[string]prometheus.Counter

	mu   sync.Mutex
	last map[int]ipc.SchedulerStats // per engine, for cumulative counters
}

var (
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	ttftBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
)

// NewMetrics creates the metrics for the served model name.
func NewMetrics(model string) *Metrics {
	r := prometheus.NewRegistry()
	ml := prometheus.Labels{"model_name": model}
	m := &Metrics{Registry: r, model: model, last: make(map[int]ipc.SchedulerStats)}
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Number of requests in model execution batches.", ConstLabels: ml}, []string{"engine"})
	m.waiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_waiting", Help: "Number of requests waiting to be processed.", ConstLabels: ml}, []string{"engine"})
	m.kvUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage. 1 means 100 percent usage.", ConstLabels: ml}, []string{"engine"})
	ttft := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", ConstLabels: ml, Buckets: ttftBuckets})
	itl := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:inter_token_latency_seconds", Help: "Histogram of inter-token latency in seconds.", ConstLabels: ml, Buckets: itlBuckets})
	e2e := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:e2e_request_latency_seconds", Help: "Histogram of e2e request latency in seconds.", ConstLabels: ml, Buckets: latencyBuckets})
	queue := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:request_queue_time_seconds", Help: "Histogram of time spent in WAITING phase for request.", ConstLabels: ml, Buckets: latencyBuckets})
	m.ttft, m.itl, m.e2e, m.queue = ttft, itl, e2e, queue
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed.", ConstLabels: ml})
	m.genTokens = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:generation_tokens_total", Help: "Number of generation tokens processed.", ConstLabels: ml})
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: ml}, []string{"finished_reason"})
	m.prefixQueries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries, in terms of number of queried tokens.", ConstLabels: ml}, []string{"engine"})
	m.prefixHits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits, in terms of number of cached tokens.", ConstLabels: ml}, []string{"engine"})
	m.preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:num_preemptions_total", Help: "Cumulative number of preemption from the engine.", ConstLabels: ml}, []string{"engine"})
	m.StreamsOpen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_frontend_streams_open", Help: "SSE streams open now."})
	m.Chunks = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_sse_chunks_total", Help: "SSE data events written."})
	m.Bytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_sse_bytes_total", Help: "SSE bytes written."})
	m.SendCPU = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_send_batch_cpu_seconds_total",
		Help: "CPU time of the batched sends of streamed chunks (one io_uring_enter per engine step, or send(2) each), from the sending thread's clock."})
	m.BatchSends = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_send_batch_sends_total", Help: "Streamed chunks sent through the batched sends."})
	m.CoalescedTokens = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_coalesced_tokens_total", Help: "Tokens that shared an SSE chunk with an earlier token (stream interval or backpressure)."})
	m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_frontend_requests_rejected_total", Help: "Requests refused before generation, by reason."}, []string{"reason"})
	m.APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_frontend_api_requests_total", Help: "Generation requests accepted for validation, by API surface (completions, chat, responses, messages)."}, []string{"api"})
	m.engineUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_frontend_engine_up", Help: "1 while the engine connection is ready."}, []string{"engine"})
	for _, c := range []prometheus.Collector{m.running, m.waiting, m.kvUsage, ttft, itl, e2e, queue, m.promptTokens, m.genTokens, m.success,
		m.prefixQueries, m.prefixHits, m.preemptions, m.StreamsOpen, m.Chunks, m.Bytes, m.SendCPU, m.BatchSends, m.CoalescedTokens, m.Rejected, m.APIRequests, m.engineUp} {
		f(c)
	}
	m.successBy, m.apiBy = make(map[string]prometheus.Counter), make(map[string]prometheus.Counter)
	for _, reason := range []string{"stop", "length", "abort", "error"} {
		m.successBy[reason] = m.success.WithLabelValues(reason)
	}
	for _, api := range []string{"completions", "chat", "responses", "messages"} {
		m.apiBy[api] = m.APIRequests.WithLabelValues(api)
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// InitEngine creates engine's series (zero until its first stats), so the
// gauges exist from the start, as vLLM's do.
func (m *Metrics) InitEngine(engine int) {
	e := strconv.Itoa(engine)
	m.running.WithLabelValues(e)
	m.waiting.WithLabelValues(e)
	m.kvUsage.WithLabelValues(e)
	m.prefixQueries.WithLabelValues(e)
	m.prefixHits.WithLabelValues(e)
	m.preemptions.WithLabelValues(e)
	m.engineUp.WithLabelValues(e)
}

// EngineState records an engine going up or down.
func (m *Metrics) EngineState(engine int, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.engineUp.WithLabelValues(strconv.Itoa(engine)).Set(v)
}

// Batch records the scheduler stats a batch carries.
func (m *Metrics) Batch(engine int, b *ipc.Outputs) {
	s := b.Stats
	if s == nil {
		return
	}
	e := strconv.Itoa(engine)
	m.running.WithLabelValues(e).Set(float64(s.Running))
	m.waiting.WithLabelValues(e).Set(float64(s.Waiting))
	m.kvUsage.WithLabelValues(e).Set(float64(s.KVUsage))
	m.mu.Lock()
	prev, ok := m.last[engine]
	m.last[engine] = *s
	m.mu.Unlock()
	if !ok || s.PrefixQueries < prev.PrefixQueries {
		prev = ipc.SchedulerStats{} // first report, or the engine restarted
	}
	m.prefixQueries.WithLabelValues(e).Add(float64(s.PrefixQueries - prev.PrefixQueries))
	if d := s.PrefixHits - prev.PrefixHits; d > 0 {
		m.prefixHits.WithLabelValues(e).Add(float64(d))
	}
	if d := s.Preemptions - prev.Preemptions; d > 0 {
		m.preemptions.WithLabelValues(e).Add(float64(d))
	}
}

// EngineStats returns each engine's latest scheduler stats (by engine index).
func (m *Metrics) EngineStats() map[int]ipc.SchedulerStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]ipc.SchedulerStats, len(m.last))
	for k, v := range m.last {
		out[k] = v
	}
	return out
}

// Finished records a finished completion.
func (m *Metrics) Finished(reason string, promptTokens, genTokens int, e2e float64) {
	if c, ok := m.successBy[reason]; ok {
		c.Inc()
	} else {
		m.success.WithLabelValues(reason).Inc()
	}
	m.promptTokens.Add(float64(promptTokens))
	m.genTokens.Add(float64(genTokens))
	m.e2e.Observe(e2e)
}

// CountAPI counts a generation request of the API surface api
// (APIRequests).
func (m *Metrics) CountAPI(api string) {
	if c, ok := m.apiBy[api]; ok {
		c.Inc()
		return
	}
	m.APIRequests.WithLabelValues(api).Inc()
}
