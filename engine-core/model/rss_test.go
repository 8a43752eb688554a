package model

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// rssBytes reads VmRSS from /proc/self/status.
func rssBytes(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("SKIP: no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("SKIP: VmRSS not found")
	return 0
}

// TestLoadRSS checks that loading holds each weight once: the resident set
// grows by at most 1.1× the weights' bytes in the file (plus a little for
// the RoPE table and the runtime), whatever the format.
func TestLoadRSS(t *testing.T) {
	s := demo.RealShape{Name: "rss", Arch: "llama", Dim: 512, Hidden: 1536, Layers: 8, Heads: 8, KVHeads: 4,
		HeadDim: 64, Vocab: 4096, MaxPos: 256, Tied: true, RopeTheta: 10000}
	for _, format := range []string{demo.FormatGGUF, demo.FormatGGUFQ8_0} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := demo.GenerateShape(path, s, 1, format); err != nil {
				t.Fatal(err)
			}
			be := cpu.New(cpu.Options{Threads: 2})
			defer be.Close()
			runtime.GC()
			debug.FreeOSMemory()
			before := rssBytes(t)
			m, err := Load(path, be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// touch every weight once, as serving does
			allLogits(t, m, []int32{1, 2, 3}, []int{3})
			runtime.GC()
			debug.FreeOSMemory()
			grew := rssBytes(t) - before
			limit := int64(1.1*float64(m.WeightBytes())) + 8<<20
			t.Logf("%s: weights %.1f MiB, RSS grew %.1f MiB (%.2f×)", format,
				float64(m.WeightBytes())/(1<<20), float64(grew)/(1<<20), float64(grew)/float64(m.WeightBytes()))
			if grew > limit {
				t.Errorf("RSS grew %d bytes loading %d bytes of weights (limit %d)", grew, m.WeightBytes(), limit)
			}
		})
	}
}
