package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// BenchmarkModelFile measures the runner's step on the model files listed
// in $SLUICE_BENCH_MODELS (colon-separated paths, e.g. files written by
// `engine-core gen-model --shape 1b-v32k --format gguf-q4_k_m`): decode of
// 1, 8 and 16 sequences with 128-token prompts in the cache, and 128- and
// 1024-token prefills. The KV cache type is the runner's default (auto).
// The batches are built by hand with one block table, so the cache is
// unified (Config.UnifiedKV) for sliding-window models too. $SLUICE_BENCH_SEQS
// sets the decode batch sizes (benchSeqs). With
// $SLUICE_BENCH_OPSTATS set, each benchmark also reports op-wait-% and
// ops-cpu-% (reportOps). Decode also reports the weight bytes a step reads
// and their rates (reportWeights).
func BenchmarkModelFile(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MODELS")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MODELS to model files (engine-core gen-model writes them)")
	}
	for _, path := range strings.Split(env, ":") {
		name := filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".gguf")
		for _, nseq := range benchSeqs(b) {
			b.Run(name+"/decode-seqs"+strconv.Itoa(nseq), func(b *testing.B) {
				const prompt, maxLen = 128, 256
				r, err := New(Config{Model: path, NumBlocks: nseq * maxLen / 16, BlockSize: 16, MaxBatchTokens: 128 * nseq, MaxSeqs: nseq, MaxModelLen: maxLen, UnifiedKV: true})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				out := make([]sample.Result, nseq)
				batch := &sched.Batch{}
				ss := benchBatch(r, nseq, prompt, maxLen)
				step(b, r, ss, batch, out) // prefill
				disp, _ := r.m.Backend().(interface{ Dispatches() uint64 })
				var d0 uint64
				if disp != nil {
					d0 = disp.Dispatches()
				}
				rec := opStatsOn(r)
				stopProf := decodeProfile(b)
				b.ResetTimer()
				cpu0, flt0 := cpuTime(), minorFaults()
				for i := 0; i < b.N; i++ {
					if len(ss[0].toks) >= maxLen {
						b.StopTimer()
						for _, s := range ss {
							s.toks, s.done = s.toks[:prompt+1], prompt
						}
						b.StartTimer()
					}
					step(b, r, ss, batch, out)
				}
				stopProf()
				report(b, b.N*nseq, cpu0)
				// first touches of the KV cache's pages (each step writes
				// new positions) and of other fresh memory
				b.ReportMetric(float64(minorFaults()-flt0)/float64(b.N), "minflt/step")
				reportWeights(b, r.m.TokenReadBytes(), b.N, cpu0)
				if rec != nil {
					reportOps(b, rec, cpu0)
				}
				if disp != nil {
					// parallel ops per step (the cpu backend's)
					b.ReportMetric(float64(disp.Dispatches()-d0)/float64(b.N), "dispatches/step")
				}
			})
		}
		// prefill1024 runs in passes of model.DefaultScratchRows rows
		for _, prompt := range []int{128, 1024} {
			b.Run(name+"/prefill"+strconv.Itoa(prompt), func(b *testing.B) {
				maxLen := 2 * prompt
				r, err := New(Config{Model: path, NumBlocks: maxLen / 16, BlockSize: 16, MaxBatchTokens: prompt, MaxSeqs: 1, MaxModelLen: maxLen, UnifiedKV: true})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				out := make([]sample.Result, 1)
				batch := &sched.Batch{}
				ss := benchBatch(r, 1, prompt, maxLen)
				rec := opStatsOn(r)
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					ss[0].toks, ss[0].done = ss[0].toks[:prompt], 0
					step(b, r, ss, batch, out)
				}
				report(b, b.N*prompt, cpu0)
				if rec != nil {
					reportOps(b, rec, cpu0)
				}
			})
		}
	}
}

// reportWeights adds the weight bytes the decode steps read from memory
// (perStep = Model.TokenReadBytes: each step reads the weights once,
// whatever its number of sequences): weights-MB/step, and their rate per
// second of wall time (weights-GB/s) and per CPU-second of the process
// (weights-GB/cpu-s), the figures to set beside scripts/membw.c's GB/s
// and GB/cpu-s measured in the same window.
func reportWeights(b *testing.B, perStep int64, steps int, cpu0 time.Duration) {
	bytes := float64(perStep) * float64(steps)
	b.ReportMetric(float64(perStep)/1e6, "weights-MB/step")
	b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "weights-GB/s")
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(bytes/d.Seconds()/1e9, "weights-GB/cpu-s")
	}
}

// opStatsOn turns on the cpu backend's recording of its parallel ops
// (cpu.Backend.RecordOps) when $SLUICE_BENCH_OPSTATS is set, and returns
// it (nil otherwise: recording reads two thread clocks per chunk and locks
// the pool's threads, so it stays out of the figures compared across
// sessions).
func opStatsOn(r *Runner) opRecorder {
	if os.Getenv("SLUICE_BENCH_OPSTATS") == "" {
		return nil
	}
	rec, _ := r.m.Backend().(opRecorder)
	if rec != nil {
		if serialOn() {
			// the caller's serial gaps count only on one OS thread
			// (cpu.OpStats.SerialCPU); reportOps unlocks it
			runtime.LockOSThread()
		}
		rec.RecordOps(true)
	}
	return rec
}

// serialOn reports whether $SLUICE_BENCH_SERIAL asks for the caller's
// serial gaps (with $SLUICE_BENCH_OPSTATS): the benchmark's goroutine is
// then locked to its OS thread for the whole run, which the pool's
// wake-ups see (a woken worker can no longer run on the caller's thread),
// so it is off for the figures compared across sessions.
func serialOn() bool { return os.Getenv("SLUICE_BENCH_SERIAL") != "" }

// opRecorder is the cpu backend's recording of its parallel ops.
type opRecorder interface {
	RecordOps(on bool)
	OpStats() cpu.OpStats
	SerialSites() []cpu.SerialSite
}

// reportOps adds, from the ops recorded since cpu0 (rec.RecordOps(true)
// just before it): op-wait-% (how much longer the parallel ops would take
// on free cores than half their CPU: the threads waiting for each other
// at each op's end; cpu.OpStats.Imbalance) and ops-cpu-% (the share of
// the process's CPU time spent in their chunks; the rest is the step's
// serial part, the pool's hand-offs and spinning, and the Go runtime).
// Both come from thread CPU times, so they hold on a loaded machine.
// Where the pool's threads spent the rest: await-% (the workers between
// their chunks: spinning through the caller's serial code and the op
// ends, and waking), join-% (the caller waiting for the workers' last
// chunks), both shares of the process's CPU time, and sleeps/op (how
// often a worker ran out of spin and had to be woken).
//
// With $SLUICE_BENCH_SERIAL set (serialOn), serial-% is the caller's
// thread CPU between parallel ops (its serial code,
// cpu.OpStats.SerialCPU) as a share of the process's CPU time, and
// serial-ms/step the wall time of those gaps per step (with the time the
// caller's thread waited for a core); with $SLUICE_BENCH_SERIAL_SITES too
// the gaps are also logged per call site of the op that ended them, in
// µs per step (steps: the benchmark's b.N).
func reportOps(b *testing.B, rec opRecorder, cpu0 time.Duration) {
	st := rec.OpStats()
	sites := rec.SerialSites()
	rec.RecordOps(false)
	serial := serialOn()
	if serial {
		runtime.UnlockOSThread()
	}
	b.ReportMetric(100*st.Imbalance(), "op-wait-%")
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(100*float64(st.ChunkCPU)/float64(d), "ops-cpu-%")
		b.ReportMetric(100*float64(st.AwaitCPU)/float64(d), "await-%")
		b.ReportMetric(100*float64(st.JoinCPU)/float64(d), "join-%")
		if serial {
			b.ReportMetric(100*float64(st.SerialCPU)/float64(d), "serial-%")
		}
	}
	if serial {
		b.ReportMetric(st.SerialWall.Seconds()*1e3/float64(b.N), "serial-ms/step")
	}
	if st.Ops > 0 {
		b.ReportMetric(float64(st.Sleeps)/float64(st.Ops), "sleeps/op")
	}
	if serial && os.Getenv("SLUICE_BENCH_SERIAL_SITES") != "" {
		var sb strings.Builder
		fmt.Fprintf(&sb, "serial gaps per step (µs CPU, µs wall, gaps) before the ops issued at:\n")
		for _, s := range sites {
			fmt.Fprintf(&sb, "%9.1f %9.1f %6.1f  %s\n", s.CPU.Seconds()*1e6/float64(b.N), s.Wall.Seconds()*1e6/float64(b.N), float64(s.Count)/float64(b.N), s.Site)
		}
		fmt.Fprintf(&sb, "%9.1f %9.1f %6.1f  total\n", st.SerialCPU.Seconds()*1e6/float64(b.N), st.SerialWall.Seconds()*1e6/float64(b.N), float64(st.SerialGaps)/float64(b.N))
		b.Log(sb.String())
	}
}

// decodeProfile starts a CPU profile of the decode steps alone when
// $SLUICE_BENCH_DECODE_PROFILE names a file prefix: each decode benchmark
// writes PREFIX-<benchmark>.prof, without the model load and the prompt's
// prefill that -test.cpuprofile would mostly show. It returns the
// function that stops the profile (a no-op when none was started).
func decodeProfile(b *testing.B) func() {
	prefix := os.Getenv("SLUICE_BENCH_DECODE_PROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + strings.NewReplacer("/", "_").Replace(b.Name()) + ".prof")
	if err != nil {
		b.Fatalf("decode profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("decode profile: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("decode profile: %v", err)
		}
	}
}

// benchSeqs is BenchmarkModelFile's decode batch sizes: 1, 8 and 16, or the
// comma-separated list in $SLUICE_BENCH_SEQS (e.g. "15,16": a batch that
// is not a multiple of the tiles' 8 rows takes the leftover-row paths).
func benchSeqs(b *testing.B) []int {
	env := os.Getenv("SLUICE_BENCH_SEQS")
	if env == "" {
		return []int{1, 8, 16}
	}
	var seqs []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("SLUICE_BENCH_SEQS: %q is not a positive count", f)
		}
		seqs = append(seqs, n)
	}
	return seqs
}

// minorFaults returns the process's minor page faults so far (getrusage).
func minorFaults() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}
