package frontend

import (
	"os"
	"runtime"

	"go.uber.org/zap"
)

// Procs is the GOMAXPROCS a frontend process connected to engines engine
// links runs with on cores usable cores, when the environment does not
// set GOMAXPROCS: one P per engine link, at most cores. The per-token path
// of each engine (its outputs decoded, dispatched to the streams and sent
// as one io_uring submission per step) is one goroutine, and a frontend
// keeps few cores busy beside it (256 streams: 5–7 % of a core); a P more
// than the process keeps busy costs on every hand-off between its
// goroutines, as the idle P's thread is woken to look for work, steals it
// or finds none, and sleeps again, and the step's work moves between the
// cores' caches. On 2 cores, one P spent 0.7–1.3 µs less CPU per streamed
// token than two at 256 streams (docs/BENCHMARKS.md, "i23tok4"). As with
// vLLM's API server (one event loop per process), more HTTP capacity
// comes from --api-server-count, whose children each run with their own
// P; GOMAXPROCS in the environment overrides this.
func Procs(cores, engines int) int {
	return max(1, min(cores, engines))
}

// setProcs sets GOMAXPROCS to Procs for engines links unless the
// environment sets it, and logs the value the process runs with.
func setProcs(engines int, log *zap.Logger) {
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok && v != "" {
		log.Info("GOMAXPROCS from the environment", zap.Int("procs", runtime.GOMAXPROCS(0)))
		return
	}
	cores := runtime.GOMAXPROCS(0) // CPU affinity and cgroup quota, as Go counts them
	p := Procs(cores, engines)
	if p != cores {
		runtime.GOMAXPROCS(p)
	}
	log.Info("GOMAXPROCS: one per engine connection (set GOMAXPROCS to change)", zap.Int("procs", p), zap.Int("cores", cores), zap.Int("engines", engines))
}
