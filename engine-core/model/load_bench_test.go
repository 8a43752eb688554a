package model

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/memstat"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// BenchmarkMoEFileLoad loads each model in $SLUICE_BENCH_MOE (files or
// Hugging Face directories, colon-separated) on the CPU backend as the
// runner does and reports the load's wall and CPU time, the resident set
// after it and the process's peak resident set (VmHWM, which the load sets
// when it runs first), and the model's weight bytes. Run it with
// -benchtime 1x in a process of its own for a clean peak.
func BenchmarkMoEFileLoad(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MOE")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MOE to model files or directories (engine-core gen-model writes them)")
	}
	for _, path := range strings.Split(env, ":") {
		b.Run(filepath.Base(path), func(b *testing.B) {
			rss0 := rssBytes(b)
			var weights int64
			b.ResetTimer()
			cpu0 := benchCPUTime()
			for i := 0; i < b.N; i++ {
				be := cpu.New(cpu.Options{QuantizeActivations: true})
				m, err := Load(path, be, LoadOptions{MaxPos: 1024})
				if err != nil {
					b.Fatal(err)
				}
				if i == b.N-1 {
					b.StopTimer()
					b.ReportMetric(float64(rssBytes(b)-rss0)/1e6, "rss-load-MB")
					weights = m.WeightBytes()
				}
				m.Close()
				be.Close()
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "load-s")
			b.ReportMetric((benchCPUTime()-cpu0).Seconds()/float64(b.N), "load-cpu-s")
			b.ReportMetric(float64(statusBytes(b, "VmHWM"))/1e6, "peak-rss-MB")
			b.ReportMetric(float64(weights)/1e6, "weights-MB")
		})
	}
}

// statusBytes reads a "Key: N kB" line of /proc/self/status, in bytes.
func statusBytes(t testing.TB, key string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("SKIP: no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, err := memstat.ParseKB(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skipf("SKIP: no %s in /proc/self/status", key)
	return 0
}
