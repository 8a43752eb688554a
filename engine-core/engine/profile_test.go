package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestProfilerRecords sends the profiler two signals and checks each wrote
// a non-empty trace and CPU profile, and that run returns when its context
// ends.
func TestProfilerRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	stamps := []time.Time{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
	var n atomic.Int32 // recordings started
	p := &profiler{dir: dir, d: 20 * time.Millisecond, log: zap.NewNop(), now: func() time.Time { return stamps[(n.Add(1)-1)%2] }}
	sig := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, sig)
	}()
	for i := 0; i < 2; i++ {
		sig <- os.Interrupt
		stamp := stamps[i].Format("20060102T150405.000")
		for _, name := range []string{"trace-" + stamp + ".out", "cpu-" + stamp + ".pprof"} {
			path := filepath.Join(dir, name)
			var size int64
			for end := time.Now().Add(10 * time.Second); size == 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if fi, err := os.Stat(path); err == nil {
					size = fi.Size()
				}
			}
			if size == 0 {
				t.Fatalf("recording %d: %s missing or empty", i, name)
			}
		}
		if n.Load() != int32(i+1) {
			t.Fatalf("after signal %d: %d recordings", i+1, n.Load())
		}
		time.Sleep(100 * time.Millisecond) // let the recording finish before the next signal
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

// TestProfilerOff checks that no directory means no profiler.
func TestProfilerOff(t *testing.T) {
	stop := startProfiler(context.Background(), "", time.Second, zap.NewNop(), os.Interrupt)
	stop()
}
